using System.Collections.Concurrent;
using System.Net;
using System.Runtime.CompilerServices;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests;

/// <summary>
/// An app that leaves state behind in every request (response headers, trailers, items, a replaced feature, a
/// changed status) and reports whether it found any of an earlier request's state when it started.
/// </summary>
// Stateless: each response names the feature collection that served it.
public sealed class LeakyAppFixture : HostFixture
{
    protected override void MapEndpoints(WebApplication app)
    {
        app.MapGet("/leaky/{index:int}", async (HttpContext ctx, int index) =>
        {
            var found = new List<string>();
            if (ctx.Items.Count != 0) found.Add("items");
            if (ctx.Response.Headers.ContainsKey("x-left-behind")) found.Add("response header");
            if (ctx.Features.Get<ILeftBehindFeature>() is not null) found.Add("feature");
            if (ctx.Request.Headers["x-index"] != index.ToString()) found.Add($"request header {ctx.Request.Headers["x-index"]}");
            if (ctx.Request.Path != $"/leaky/{index}") found.Add($"path {ctx.Request.Path}");
            if (ctx.Response.StatusCode != 200) found.Add($"status {ctx.Response.StatusCode}");
            if (ctx.Features.Get<IHttpResponseTrailersFeature>()?.Trailers.Count > 0) found.Add("trailers");

            ctx.Items["left"] = index;
            ctx.Features.Set<ILeftBehindFeature>(new LeftBehind());
            ctx.Response.StatusCode = 202;
            ctx.Response.Headers["x-left-behind"] = index.ToString();
            ctx.Response.Headers["x-features"] = RuntimeHelpers.GetHashCode(ctx.Features).ToString();
            ctx.Response.AppendTrailer("x-trailer", index.ToString());
            await ctx.Response.WriteAsync(found.Count == 0 ? $"clean {index}" : $"{index} found: {string.Join(", ", found)}");
        });
    }

    public interface ILeftBehindFeature;

    private sealed class LeftBehind : ILeftBehindFeature;
}

public sealed class Http2FeatureReuseTests(LeakyAppFixture fixture) : IClassFixture<LeakyAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> Http2Transports =>
        TestClients.AllTransports(HttpTransport.Http2Cleartext, HttpTransport.Http2Tls);

    [Theory]
    [MemberData(nameof(Http2Transports))]
    public async Task OneConnection_SequentialThenConcurrentStreams_NoStateOfAnEarlierRequestIsSeen(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);
        var featureCollections = new ConcurrentDictionary<string, byte>();

        for (var i = 0; i < 30; i++)
        {
            featureCollections.TryAdd(await AssertCleanAsync(client, i), 0);
        }
        foreach (var features in await Task.WhenAll(Enumerable.Range(100, 60).Select(i => AssertCleanAsync(client, i))))
        {
            featureCollections.TryAdd(features, 0);
        }
        for (var i = 200; i < 210; i++)
        {
            featureCollections.TryAdd(await AssertCleanAsync(client, i), 0);
        }

        if (kind == ServerKind.ProxyServer)
        {
            // Streams of one connection reuse finished streams' features (and so the host's HttpContext): the 30
            // sequential requests need about one, the 60 concurrent ones at most their concurrency.
            Assert.True(featureCollections.Count <= 70, $"{featureCollections.Count} feature collections for 100 requests");
        }
    }

    /// <returns>The identity of the feature collection that served the request.</returns>
    private static async Task<string> AssertCleanAsync(HttpClient client, int index)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, $"/leaky/{index}")
        {
            Version = client.DefaultRequestVersion,
            VersionPolicy = client.DefaultVersionPolicy,
        };
        request.Headers.Add("x-index", index.ToString());
        using var response = await client.SendAsync(request);
        var body = await response.Content.ReadAsStringAsync();

        Assert.Equal(HttpStatusCode.Accepted, response.StatusCode);
        Assert.Equal($"clean {index}", body);
        Assert.Equal(index.ToString(), Assert.Single(response.Headers.GetValues("x-left-behind")));
        Assert.Equal(index.ToString(), Assert.Single(response.TrailingHeaders.GetValues("x-trailer")));
        return Assert.Single(response.Headers.GetValues("x-features"));
    }
}
