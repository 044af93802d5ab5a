using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// A backend on Kestrel that can hold, stall, break and count requests, behind routes that fail in each way
/// a proxy must report: <c>/dead</c> (nobody listens), <c>/slow</c> (route Timeout 300 ms), <c>/pool</c> (one
/// request at a time, 200 ms queue timeout), <c>/stream</c> (h2c, so one backend stream can die alone) and
/// <c>/count</c> (HTTP/1.1; records every request that reaches the backend).
/// </summary>
// Shared by the tests of one class; every member is thread-safe.
public sealed class FailureProxyFixture : ProxyFixture
{
    private readonly ConcurrentDictionary<string, TaskCompletionSource> _releases = new();
    private readonly ConcurrentDictionary<string, TaskCompletionSource> _arrivals = new();

    /// <summary>Every path that reached the backend's /count endpoint.</summary>
    public ConcurrentQueue<string> CountedPaths { get; } = new();

    public void Release(string id) => Slot(_releases, id).TrySetResult();

    /// <summary>Completes when the hold or stream request <paramref name="id"/> reached the backend.</summary>
    public Task Arrived(string id) => Slot(_arrivals, id).Task;

    private static TaskCompletionSource Slot(ConcurrentDictionary<string, TaskCompletionSource> slots, string id) =>
        slots.GetOrAdd(id, _ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously));

    protected override void MapBackend(WebApplication app)
    {
        app.MapGet("/pool/hold/{id}", async (HttpContext context, string id) =>
        {
            Slot(_arrivals, id).TrySetResult();
            await Slot(_releases, id).Task.WaitAsync(context.RequestAborted);
            await context.Response.WriteAsync("released");
        });
        app.MapGet("/pool/quick", () => "quick");

        // Never answers: only the proxy's route timeout ends it.
        app.MapGet("/slow", async (HttpContext context) => await Task.Delay(Timeout.Infinite, context.RequestAborted));

        // Streams one line, then completes with a second line when released...
        app.MapGet("/stream/ok/{id}", async (HttpContext context, string id) =>
        {
            await context.Response.WriteAsync("first\n");
            await context.Response.Body.FlushAsync();
            Slot(_arrivals, id).TrySetResult();
            await Slot(_releases, id).Task.WaitAsync(context.RequestAborted);
            await context.Response.WriteAsync("last\n");
        });

        // ...or streams one line and dies (Kestrel resets the stream with INTERNAL_ERROR).
        app.MapGet("/stream/die", async (HttpContext context) =>
        {
            await context.Response.WriteAsync("partial\n");
            await context.Response.Body.FlushAsync();
            context.Abort();
        });

        app.Map("/count/{**rest}", async (HttpContext context) =>
        {
            CountedPaths.Enqueue(context.Request.Path.Value ?? "");
            // What the proxy said the client asked for, echoed for the authority tests.
            context.Response.Headers["x-seen-forwarded-host"] = context.Request.Headers["X-Forwarded-Host"];
            context.Response.Headers["x-seen-forwarded-proto"] = context.Request.Headers["X-Forwarded-Proto"];
            await context.Response.WriteAsync("counted");
        });
    }

    protected override void Configure(ReverseProxyKeys config, TestHost backend)
    {
        var http = backend.HttpAddress.ToString();
        config.Route("dead", "dead", "/dead/{**rest}").Destination("dead", ReverseProxyKeys.DeadAddress());
        config.Route("slow", "h1", "/slow").RouteSet("slow", "Timeout", "00:00:00.300");
        config.Route("count", "h1", "/count/{**rest}");
        config.Destination("h1", http);
        config.Route("pool", "pool", "/pool/{**rest}").Destination("pool", http)
            .ClusterSet("pool", "HttpClient:MaxConcurrentRequestsPerDestination", "1")
            .ClusterSet("pool", "HttpClient:QueueTimeout", "00:00:00.200");
        config.Route("stream", "h2", "/stream/{**rest}").Destination("h2", backend.H2cAddress.ToString()).H2c("h2");
    }
}

/// <summary>Each failure mode through the proxy, hosted on Kestrel and on our server.</summary>
public sealed class FailureProxyTests(FailureProxyFixture fixture) : IClassFixture<FailureProxyFixture>
{
    private static readonly TimeSpan s_bound = TimeSpan.FromSeconds(10);

    public static TheoryData<ServerKind> Servers => new(Enum.GetValues<ServerKind>());

    private async Task<HttpClient> ClientAsync(ServerKind kind) => TestClients.Create(await fixture.ProxyAsync(kind), HttpTransport.Http2Tls, s_bound);

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task BackendDown_Get_502(ServerKind kind)
    {
        using var client = await ClientAsync(kind);

        using var response = await client.GetAsync("/dead/anything");

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task BackendSlowPastRouteTimeout_Get_504(ServerKind kind)
    {
        using var client = await ClientAsync(kind);

        using var response = await client.GetAsync("/slow");

        Assert.Equal(HttpStatusCode.GatewayTimeout, response.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task PoolExhausted_SecondRequest_503AfterQueueTimeoutWithReason(ServerKind kind)
    {
        using var client = await ClientAsync(kind);
        var id = Guid.NewGuid().ToString("N");
        var holding = client.GetStringAsync($"/pool/hold/{id}");
        await fixture.Arrived(id).WaitAsync(s_bound); // the only slot is taken

        using var refused = await client.GetAsync("/pool/quick");
        var reason = await refused.Content.ReadAsStringAsync();
        fixture.Release(id);

        Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.StatusCode);
        Assert.Contains("had no free slot within 200 ms", reason);
        Assert.Equal("released", await holding.WaitAsync(s_bound));
        Assert.Equal("quick", await client.GetStringAsync("/pool/quick")); // the slot is back
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task BackendDiesMidStream_ThatStreamReset_OthersOnTheSameConnectionComplete(ServerKind kind)
    {
        using var client = await ClientAsync(kind);
        var ids = Enumerable.Range(0, 5).Select(_ => Guid.NewGuid().ToString("N")).ToArray();
        var healthy = ids.Select(id => client.GetStringAsync($"/stream/ok/{id}")).ToArray();
        await Task.WhenAll(ids.Select(id => fixture.Arrived(id))).WaitAsync(s_bound); // all in flight

        using var dying = await client.GetAsync("/stream/die", HttpCompletionOption.ResponseHeadersRead);
        var broken = await Assert.ThrowsAnyAsync<Exception>(() => dying.Content.ReadAsStringAsync().WaitAsync(s_bound));
        foreach (var id in ids)
        {
            fixture.Release(id);
        }

        // RST_STREAM(INTERNAL_ERROR) from the proxy: the client cannot mistake the truncated body for a whole one.
        var protocolError = Assert.IsType<HttpProtocolException>(broken.InnerException ?? broken);
        Assert.Equal(0x2, protocolError.ErrorCode);
        Assert.All(await Task.WhenAll(healthy).WaitAsync(s_bound), body => Assert.Equal("first\nlast\n", body));
    }
}
