using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class TransformTests
{
    private static async Task<(EchoResult Echo, HttpResponseMessage Response)> SendAsync(string path, Action<ProxyConfigDictionary> transforms,
        Action<HttpRequestMessage>? request = null, string routePath = "/{**catch-all}")
    {
        await using var backend = await Backends.StartEchoAsync();
        var config = new ProxyConfigDictionary().Route("r1", "c1", routePath).Destination("c1", "d1", backend.Url);
        transforms(config);
        await using var proxy = await Proxies.StartConfiguredAsync(config);
        using var http = proxy.CreateClient();
        var message = new HttpRequestMessage(HttpMethod.Get, path);
        request?.Invoke(message);
        var response = await http.SendAsync(message);
        await response.Content.LoadIntoBufferAsync();
        return (await response.ReadEchoAsync(), response);
    }

    [Fact]
    public async Task PathPrefix_PrependsPrefix()
    {
        var (echo, _) = await SendAsync("/items?q=1", c => c.Set("Routes:r1:Transforms:0:PathPrefix", "/v1"));
        Assert.Equal("/v1/items", echo.Path);
        Assert.Equal("?q=1", echo.Query);
    }

    [Fact]
    public async Task PathRemovePrefix_RemovesMatchingPrefix()
    {
        var (echo, _) = await SendAsync("/api/items", c => c.Set("Routes:r1:Transforms:0:PathRemovePrefix", "/api"));
        Assert.Equal("/items", echo.Path);
    }

    [Fact]
    public async Task PathSet_ReplacesPath()
    {
        var (echo, _) = await SendAsync("/anything", c => c.Set("Routes:r1:Transforms:0:PathSet", "/fixed"));
        Assert.Equal("/fixed", echo.Path);
    }

    [Fact]
    public async Task PathPattern_FillsRouteValues()
    {
        var (echo, _) = await SendAsync("/api/orders/7/lines", c => c.Set("Routes:r1:Transforms:0:PathPattern", "/v2/{id}/{**rest}"),
            routePath: "/api/orders/{id}/{**rest}");
        Assert.Equal("/v2/7/lines", echo.Path);
    }

    [Fact]
    public async Task QueryValueParameter_SetAndAppend()
    {
        var (echo, _) = await SendAsync("/?a=1&b=2", c => c
            .Set("Routes:r1:Transforms:0:QueryValueParameter", "a").Set("Routes:r1:Transforms:0:Set", "x")
            .Set("Routes:r1:Transforms:1:QueryValueParameter", "c").Set("Routes:r1:Transforms:1:Append", "3"));
        Assert.Equal("?a=x&b=2&c=3", echo.Query);
    }

    [Fact]
    public async Task RequestHeader_SetAppendRemove()
    {
        var (echo, _) = await SendAsync("/", c => c
            .Set("Routes:r1:Transforms:0:RequestHeader", "x-set").Set("Routes:r1:Transforms:0:Set", "new")
            .Set("Routes:r1:Transforms:1:RequestHeader", "x-append").Set("Routes:r1:Transforms:1:Append", "second")
            .Set("Routes:r1:Transforms:2:RequestHeaderRemove", "x-remove"),
            m =>
            {
                m.Headers.Add("x-set", "old");
                m.Headers.Add("x-append", "first");
                m.Headers.Add("x-remove", "gone");
            });
        Assert.Equal("new", echo.Headers["x-set"]);
        Assert.Equal("first, second", echo.Headers["x-append"]);
        Assert.False(echo.Headers.ContainsKey("x-remove"));
    }

    [Fact]
    public async Task ResponseHeader_SetAppendRemove()
    {
        var (_, response) = await SendAsync("/", c => c
            .Set("Routes:r1:Transforms:0:ResponseHeader", "x-backend").Set("Routes:r1:Transforms:0:Set", "proxy")
            .Set("Routes:r1:Transforms:1:ResponseHeader", "x-extra").Set("Routes:r1:Transforms:1:Append", "1")
            .Set("Routes:r1:Transforms:2:ResponseHeaderRemove", "Content-Type")
            .Set("Routes:r1:Transforms:3:ResponseHeader", "x-failure-only").Set("Routes:r1:Transforms:3:Set", "1")
            .Set("Routes:r1:Transforms:3:When", "Failure"));
        Assert.Equal("proxy", response.Headers.GetValues("x-backend").Single());
        Assert.Equal("1", response.Headers.GetValues("x-extra").Single());
        Assert.Null(response.Content.Headers.ContentType);
        Assert.False(response.Headers.Contains("x-failure-only"));
    }

    [Fact]
    public async Task RequestHeaderOriginalHost_ForwardsClientHost()
    {
        var (echo, _) = await SendAsync("/", c => c.Set("Routes:r1:Transforms:0:RequestHeaderOriginalHost", "true"),
            m => m.Headers.Host = "public.example");
        Assert.Equal("public.example", echo.Headers["host"]);
    }

    [Fact]
    public async Task XForwarded_Off_ClientValuesPassThroughUntouched()
    {
        var (echo, _) = await SendAsync("/", c => c.Set("Routes:r1:Transforms:0:X-Forwarded", "Off"),
            m => m.Headers.Add("X-Forwarded-For", "10.1.1.1"));
        Assert.Equal("10.1.1.1", echo.Headers["x-forwarded-for"]);
        Assert.False(echo.Headers.ContainsKey("x-forwarded-proto"));
    }

    [Fact]
    public async Task XForwarded_AppendFor_AddsProxyHop()
    {
        var (echo, _) = await SendAsync("/", c => c.Set("Routes:r1:Transforms:0:X-Forwarded", "Append"),
            m => m.Headers.Add("X-Forwarded-For", "10.1.1.1"));
        Assert.Equal("10.1.1.1, 127.0.0.1", echo.Headers["x-forwarded-for"]);
    }

    [Fact]
    public async Task Forwarded_ForProtoHost_Rfc7239Value()
    {
        var (echo, _) = await SendAsync("/", c => c.Set("Routes:r1:Transforms:0:Forwarded", "for,proto,host"),
            m => m.Headers.Host = "h.example");
        Assert.Equal("for=127.0.0.1;host=\"h.example\";proto=http", echo.Headers["forwarded"]);
        Assert.False(echo.Headers.ContainsKey("x-forwarded-for"));
    }
}

public class FailureTransformTests
{
    [Fact]
    public async Task ResponseHeader_WhenFailure_AppliedToProxyErrorResponse()
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", Proxies.DeadAddress())
            .Set("Routes:r1:Transforms:0:ResponseHeader", "x-proxy-error").Set("Routes:r1:Transforms:0:Set", "1")
            .Set("Routes:r1:Transforms:0:When", "Failure");
        await using var proxy = await Proxies.StartConfiguredAsync(config);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.Equal(System.Net.HttpStatusCode.BadGateway, response.StatusCode);
        Assert.Equal("1", response.Headers.GetValues("x-proxy-error").Single());
    }
}
