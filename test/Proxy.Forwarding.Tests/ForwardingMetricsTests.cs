using System.Diagnostics.Metrics;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Tests.Infrastructure;
using Proxy.Testing;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// The "Proxy.Forwarding" meter over real sockets, on each of the suite's hosts: a <see cref="MetricRecorder"/> scoped to
/// the proxy's IMeterFactory waits for each measurement; backends hold requests on signals, never on sleeps.
/// </summary>
public sealed class ForwardingMetricsTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(20);

    private static MetricRecorder Record(TestApp proxy) => new("Proxy.Forwarding", proxy.Services.GetRequiredService<IMeterFactory>());

    private static bool IsD1(RecordedMeasurement m) => m.Tag("proxy.cluster") == "c1" && m.Tag("proxy.destination") == "d1";

    /// <summary>A backend whose requests wait at <paramref name="release"/>; <paramref name="arrived"/> counts them in.</summary>
    private static Task<TestApp> StartHoldingBackendAsync(TaskCompletionSource release, SemaphoreSlim arrived, TestProtocol protocol = TestProtocol.Http1) =>
        ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            arrived.Release();
            await release.Task.WaitAsync(context.RequestAborted);
            await context.Response.WriteAsync("released");
        }), protocol);

    [Fact]
    public async Task DestinationActiveRequests_HeldRequest_CountedThenReturned()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var arrived = new SemaphoreSlim(0);
        await using var backend = await StartHoldingBackendAsync(release, arrived);
        await using var proxy = await Proxies.StartForAsync(backend);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        var call = client.GetStringAsync("/held");
        Assert.True(await arrived.WaitAsync(Guard));
        await metrics.WaitAsync("proxy.forwarding.destination.active_requests", m => m.Value == 1 && IsD1(m));
        release.SetResult();

        Assert.Equal("released", await call.WaitAsync(Guard));
        await metrics.WaitForCurrentAsync("proxy.forwarding.destination.active_requests", v => v == 0, IsD1);
        Assert.Empty(metrics.Of("proxy.forwarding.pool.queue.duration")); // an unbounded destination never queues
    }

    [Fact]
    public async Task PoolQueueDuration_RequestWaitsForTheOnlySlot_RecordedWithDestination()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var arrived = new SemaphoreSlim(0);
        await using var backend = await StartHoldingBackendAsync(release, arrived);
        await using var proxy = await Proxies.StartForAsync(backend,
            extra: c => c.Set("Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination", "1"));
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        var first = client.GetStringAsync("/first");
        Assert.True(await arrived.WaitAsync(Guard));
        var second = client.GetStringAsync("/second");
        await metrics.WaitAsync("proxy.forwarding.pool.queue_length", m => m.Value == 1 && IsD1(m));
        Assert.Empty(metrics.Of("proxy.forwarding.pool.queue.duration"));
        release.SetResult();

        Assert.Equal("released", await first.WaitAsync(Guard));
        Assert.Equal("released", await second.WaitAsync(Guard));
        var waited = await metrics.WaitAsync("proxy.forwarding.pool.queue.duration", IsD1);
        Assert.True(waited.Value >= 0);
        await metrics.WaitAsync("proxy.forwarding.pool.queue_length", m => m.Value == -1 && IsD1(m));
    }

    [Fact]
    public async Task SseActiveStreams_EventStreamRelayed_CountedUntilItEnds()
    {
        var end = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "text/event-stream";
            await context.Response.WriteAsync("data: 1\n\n");
            await context.Response.Body.FlushAsync();
            await end.Task.WaitAsync(context.RequestAborted);
        }));
        await using var proxy = await Proxies.StartForAsync(backend);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        using var response = await client.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
        Assert.Equal("data: 1", await reader.ReadLineAsync().WaitAsync(Guard));
        var started = await metrics.WaitAsync("proxy.forwarding.sse.active_streams", m => m.Value == 1);
        Assert.Equal("r1", started.Tag("proxy.route"));
        Assert.Equal("c1", started.Tag("proxy.cluster"));
        end.SetResult();

        Assert.Equal("", await reader.ReadLineAsync().WaitAsync(Guard));
        Assert.Null(await reader.ReadLineAsync().WaitAsync(Guard));
        await metrics.WaitAsync("proxy.forwarding.sse.active_streams", m => m.Value == -1 && m.Tag("proxy.cluster") == "c1");
    }

    [Fact]
    public async Task SseActiveStreams_PlainResponse_NotCounted()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        using var response = await client.GetAsync("/plain");
        await response.ReadEchoAsync();

        await metrics.WaitAsync("proxy.forwarding.requests", m => m.Tag("http.response.status_code") == "200");
        Assert.Empty(metrics.Of("proxy.forwarding.sse.active_streams"));
    }

    [Fact]
    public async Task Errors_BackendDown_CountedByForwarderError()
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", Proxies.DeadAddress());
        await using var proxy = await Proxies.StartConfiguredAsync(config);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        using var response = await client.GetAsync("/down");

        Assert.Equal(502, (int)response.StatusCode);
        var error = await metrics.WaitAsync("proxy.forwarding.errors", m => m.Tag("error.type") == "Request");
        Assert.Equal("r1", error.Tag("proxy.route"));
        Assert.Equal("c1", error.Tag("proxy.cluster"));
        await metrics.WaitAsync("proxy.forwarding.requests", m => m.Tag("error.type") == "Request" && m.Tag("http.response.status_code") == "502");
    }

    [Fact]
    public async Task Errors_NoHealthyDestination_CountedAsNoAvailableDestinations()
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin");
        await using var proxy = await Proxies.StartConfiguredAsync(config);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        using var response = await client.GetAsync("/none");

        Assert.Equal(503, (int)response.StatusCode);
        await metrics.WaitAsync("proxy.forwarding.errors", m => m.Tag("error.type") == "NoAvailableDestinations");
    }

    /// <summary>
    /// The native relay reports its backend connections (HTTP/2 here: h2c backend); the HttpClient path cannot (its
    /// connections are SocketsHttpHandler's, counted by the "System.Net.Http" meter), so there the instrument stays silent.
    /// </summary>
    [Fact]
    public async Task BackendConnections_H2cBackend_OpenedThenClosedWhenBackendStops()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        release.SetResult();
        using var arrived = new SemaphoreSlim(0);
        var backend = await StartHoldingBackendAsync(release, arrived, TestProtocol.Http2);
        await using var proxy = await Proxies.StartForAsync(backend, h2cBackend: true);
        using var metrics = Record(proxy);
        using var client = proxy.CreateClient();

        Assert.Equal("released", await client.GetStringAsync("/one"));
#if NATIVE_RELAY
        await metrics.WaitAsync("proxy.forwarding.backend.connections",
            m => m.Value == 1 && IsD1(m) && m.Tag("network.protocol.version") == "2");
        await backend.DisposeAsync(); // GOAWAY, then the connection closes
        await metrics.WaitAsync("proxy.forwarding.backend.connections",
            m => m.Value == -1 && IsD1(m) && m.Tag("network.protocol.version") == "2");
#else
        await backend.DisposeAsync();
        Assert.Empty(metrics.Of("proxy.forwarding.backend.connections"));
#endif
    }
}
