using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>RequestHeadersAllowed, ResponseHeadersCopy/Allowed, ResponseTrailersCopy/Allowed.</summary>
public class HeaderCopyTransformTests
{
    [Fact]
    public async Task RequestHeadersAllowed_OnlyListedHeadersReachBackend()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend, extra: c => c
            .Set("Routes:r1:Transforms:0:RequestHeadersAllowed", "x-keep;Content-Type")
            .Set("Routes:r1:Transforms:1:RequestHeader", "x-added").Set("Routes:r1:Transforms:1:Set", "by-proxy"));
        using var http = proxy.CreateClient();
        var message = new HttpRequestMessage(HttpMethod.Post, "/") { Content = new StringContent("{}", System.Text.Encoding.UTF8, "application/json") };
        message.Headers.Add("x-keep", "1");
        message.Headers.Add("x-drop", "2");
        message.Headers.Add("Accept-Language", "fr");

        using var response = await http.SendAsync(message);
        var echo = await response.ReadEchoAsync();

        Assert.Equal("1", echo.Headers["x-keep"]);
        Assert.StartsWith("application/json", echo.Headers["content-type"], StringComparison.Ordinal);
        Assert.False(echo.Headers.ContainsKey("x-drop"));
        Assert.False(echo.Headers.ContainsKey("accept-language"));
        // Transforms still add their own headers, and YARP's default X-Forwarded-* still applies.
        Assert.Equal("by-proxy", echo.Headers["x-added"]);
        Assert.True(echo.Headers.ContainsKey("x-forwarded-for"));
        Assert.Equal("{}", echo.Body);
    }

    private static Task<TestApp> StartHeaderBackendAsync() => ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
    {
        context.Response.Headers["x-one"] = "1";
        context.Response.Headers["x-two"] = "2";
        context.Response.ContentType = "text/plain";
        await context.Response.WriteAsync("body");
        context.Response.AppendTrailer("x-trailer-one", "t1");
        context.Response.AppendTrailer("x-trailer-two", "t2");
    }), TestProtocol.Http2);

    private static async Task<HttpResponseMessage> SendAsync(Action<ProxyConfigDictionary> transforms)
    {
        await using var backend = await StartHeaderBackendAsync();
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true, extra: transforms);
        using var http = proxy.CreateClient();
        var response = await http.GetAsync("/");
        Assert.Equal("body", await response.Content.ReadAsStringAsync());
        return response;
    }

    [Fact]
    public async Task ResponseHeadersAllowed_OnlyListedHeadersReachClient()
    {
        using var response = await SendAsync(c => c.Set("Routes:r1:Transforms:0:ResponseHeadersAllowed", "X-One;Content-Type"));
        Assert.Equal("1", response.Headers.GetValues("x-one").Single());
        Assert.False(response.Headers.Contains("x-two"));
        Assert.Equal("text/plain", response.Content.Headers.ContentType?.MediaType);
        Assert.Equal("t1", response.TrailingHeaders.GetValues("x-trailer-one").Single());
    }

    [Fact]
    public async Task ResponseHeadersCopyFalse_NoBackendHeaders_TransformsStillApply()
    {
        using var response = await SendAsync(c => c
            .Set("Routes:r1:Transforms:0:ResponseHeadersCopy", "false")
            .Set("Routes:r1:Transforms:1:ResponseHeader", "x-proxy").Set("Routes:r1:Transforms:1:Set", "p"));
        Assert.False(response.Headers.Contains("x-one"));
        Assert.False(response.Headers.Contains("x-two"));
        Assert.Null(response.Content.Headers.ContentType);
        Assert.Equal("p", response.Headers.GetValues("x-proxy").Single());
        Assert.Equal("t2", response.TrailingHeaders.GetValues("x-trailer-two").Single());
    }

    [Fact]
    public async Task ResponseTrailersAllowed_OnlyListedTrailersReachClient()
    {
        using var response = await SendAsync(c => c.Set("Routes:r1:Transforms:0:ResponseTrailersAllowed", "x-trailer-two"));
        Assert.Equal("1", response.Headers.GetValues("x-one").Single());
        Assert.False(response.TrailingHeaders.Contains("x-trailer-one"));
        Assert.Equal("t2", response.TrailingHeaders.GetValues("x-trailer-two").Single());
    }

    [Fact]
    public async Task ResponseTrailersCopyFalse_NoBackendTrailers_TrailerTransformsStillApply()
    {
        using var response = await SendAsync(c => c
            .Set("Routes:r1:Transforms:0:ResponseTrailersCopy", "false")
            .Set("Routes:r1:Transforms:1:ResponseTrailer", "x-proxy-trailer").Set("Routes:r1:Transforms:1:Set", "pt"));
        Assert.Equal("2", response.Headers.GetValues("x-two").Single());
        Assert.False(response.TrailingHeaders.Contains("x-trailer-one"));
        Assert.False(response.TrailingHeaders.Contains("x-trailer-two"));
        Assert.Equal("pt", response.TrailingHeaders.GetValues("x-proxy-trailer").Single());
    }
}
