using System.Net;
using System.Security.Cryptography;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests;

/// <summary>The app HttpClient (SocketsHttpHandler) talks to: greeting, echo, concurrency barrier, trailers.</summary>
// Shared by the requests of one host; the barrier is thread-safe.
public sealed class HttpClientAppFixture : HostFixture
{
    public ArrivalBarrier Barrier { get; } = new();

    protected override void MapEndpoints(WebApplication app)
    {
        app.MapGet("/hello", (HttpContext ctx) => $"hello over {ctx.Request.Protocol} tls={ctx.Request.IsHttps}");

        app.MapPost("/echo", async (HttpContext ctx) =>
        {
            ctx.Response.ContentType = "application/octet-stream";
            if (ctx.Request.Protocol == "HTTP/2")
            {
                // Streams both ways at once: request DATA in, response DATA out, windows refilled as we go.
                await ctx.Request.Body.CopyToAsync(ctx.Response.Body, ctx.RequestAborted);
                return;
            }

            // HTTP/1.1 clients may send the whole request before reading any response: buffer it first.
            using var buffer = new MemoryStream();
            await ctx.Request.Body.CopyToAsync(buffer, ctx.RequestAborted);
            buffer.Position = 0;
            await buffer.CopyToAsync(ctx.Response.Body, ctx.RequestAborted);
        });

        // Each stream answers with its own index and the client's port (one port = one connection),
        // but only once `expect` streams of its group are in the app together.
        app.MapGet("/concurrent/{index:int}", async (HttpContext ctx, int index, string group, int expect) =>
        {
            var seen = await Barrier.ArriveAsync(group, expect, ctx.RequestAborted);
            return $"{index}:{ctx.Connection.RemotePort}:{seen}";
        });

        app.MapGet("/trailers", async (HttpContext ctx) =>
        {
            ctx.Response.DeclareTrailer("x-checksum");
            await ctx.Response.WriteAsync("body before trailers");
            ctx.Response.AppendTrailer("x-checksum", "c0ffee");
            ctx.Response.AppendTrailer("x-item-count", "3");
        });
    }
}

public sealed class HttpClientTests(HttpClientAppFixture fixture) : IClassFixture<HttpClientAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> AllTransports => TestClients.AllTransports();

    public static TheoryData<ServerKind, HttpTransport> Http2Transports =>
        TestClients.AllTransports(HttpTransport.Http2Tls, HttpTransport.Http2Cleartext);

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Get_ExactVersion_ServerSeesSameProtocol(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);

        using var response = await client.GetAsync("/hello");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(transport.Version(), response.Version);
        Assert.Equal(
            $"hello over {transport.RequestProtocol()} tls={transport.IsTls()}",
            await response.Content.ReadAsStringAsync());
    }

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Get_ServerKind_ServerHeaderNamesTheServerThatAnswered(ServerKind kind, HttpTransport transport)
    {
        // Guards the matrix itself: a ProxyServer case that silently ran on Kestrel would prove nothing.
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);

        using var response = await client.GetAsync("/hello");

        var product = Assert.Single(response.Headers.Server).Product?.Name;
        Assert.Equal(kind == ServerKind.Kestrel ? "Kestrel" : "proxy", product);
    }

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Post_SeveralMegabytes_EchoedByteForByte(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);
        // 6 MiB: several times every default flow-control window, so WINDOW_UPDATEs must flow both ways.
        var payload = RandomNumberGenerator.GetBytes(6 * 1024 * 1024 + 123);

        using var request = new HttpRequestMessage(HttpMethod.Post, "/echo")
        {
            Version = transport.Version(),
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new DuplexPayloadContent(payload),
        };
        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead);
        var echoed = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(transport.Version(), response.Version);
        Assert.Equal(payload.Length, echoed.Length);
        Assert.Equal(Convert.ToHexString(SHA256.HashData(payload)), Convert.ToHexString(SHA256.HashData(echoed)));
    }

    [Theory]
    [MemberData(nameof(Http2Transports))]
    public async Task Get_150RequestsOnOneConnection_100InFlightTogether_EachGetsItsOwnAnswer(ServerKind kind, HttpTransport transport)
    {
        // NOTE: 100 is both servers' default SETTINGS_MAX_CONCURRENT_STREAMS: the first 100 streams wait in the
        // app until all 100 are there; the other 50 are queued by the client and answered after.
        const int total = 150;
        const int together = 100;
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);
        var group = Guid.NewGuid().ToString("N");

        var responses = await Task.WhenAll(Enumerable.Range(0, total).Select(async i =>
        {
            using var response = await client.GetAsync($"/concurrent/{i}?group={group}&expect={together}");
            Assert.Equal(HttpStatusCode.OK, response.StatusCode);
            Assert.Equal(HttpVersion.Version20, response.Version);
            return (Index: i, Body: await response.Content.ReadAsStringAsync());
        }));

        var ports = new HashSet<string>();
        foreach (var (index, body) in responses)
        {
            var parts = body.Split(':');
            Assert.Equal(index.ToString(), parts[0]);
            ports.Add(parts[1]);
            Assert.True(int.Parse(parts[2]) >= together, $"stream {index} saw only {parts[2]} arrivals");
        }

        Assert.Single(ports);
    }

    [Theory]
    [MemberData(nameof(Http2Transports))]
    public async Task Get_ResponseTrailers_VisibleInTrailingHeaders(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);

        using var response = await client.GetAsync("/trailers", HttpCompletionOption.ResponseHeadersRead);
        // Trailers arrive after the body: read it to the end first.
        var body = await response.Content.ReadAsStringAsync();

        Assert.Equal("body before trailers", body);
        Assert.Equal(HttpVersion.Version20, response.Version);
        Assert.Equal("c0ffee", Assert.Single(response.TrailingHeaders.GetValues("x-checksum")));
        Assert.Equal("3", Assert.Single(response.TrailingHeaders.GetValues("x-item-count")));
    }
}
