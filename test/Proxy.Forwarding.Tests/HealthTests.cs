using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Time.Testing;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class HealthTests
{
    [Fact]
    public async Task ActiveProbe_FailingDestination_TakenOutThenBackAfterRecovery()
    {
        var aHealthy = false;
        await using var a = await ProxyTestHost.StartBackendAsync(app =>
        {
            app.MapGet("/health", () => Volatile.Read(ref aHealthy) ? Results.Ok() : Results.StatusCode(500));
            app.MapFallback(() => "a");
        });
        await using var b = await ProxyTestHost.StartBackendAsync(app =>
        {
            app.MapGet("/health", () => "ok");
            app.MapFallback(() => "b");
        });
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "a", a.Url).Destination("c1", "b", b.Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:HealthCheck:Active:Enabled", "true")
            .Set("Clusters:c1:HealthCheck:Active:Interval", "01:00:00")
            .Set("Clusters:c1:HealthCheck:Active:Path", "/health"));
        using var http = proxy.CreateClient();
        var checker = proxy.Services.GetServices<IHostedService>().OfType<ActiveHealthChecker>().Single();
        var cluster = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"];

        await checker.ProbeClusterAsync(cluster, CancellationToken.None);
        await checker.ProbeClusterAsync(cluster, CancellationToken.None);
        var whileDown = await Bodies(http, 6);
        Volatile.Write(ref aHealthy, true);
        await checker.ProbeClusterAsync(cluster, CancellationToken.None);
        var afterRecovery = await Bodies(http, 6);

        Assert.Equal(DestinationHealth.Healthy, cluster.Destinations.Single(d => d.DestinationId == "b").Health);
        Assert.All(whileDown, body => Assert.Equal("b", body));
        Assert.Equal(3, afterRecovery.Count(x => x == "a"));
    }

    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(15);

    [Fact]
    public async Task PassiveHealth_TransportFailureRate_DeadDestinationSatOutAfterMinimalCount()
    {
        await using var live = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("live")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "dead", Proxies.DeadAddress()).Destination("c1", "live", live.Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:HealthCheck:Passive:Enabled", "true"));
        using var http = proxy.CreateClient();

        var statuses = new List<HttpStatusCode>();
        for (var i = 0; i < 30; i++)
        {
            using var response = await http.GetAsync("/");
            statuses.Add(response.StatusCode);
        }

        // Round robin reaches "dead" on every other request; its 10th failure (request 19) trips
        // the policy (10 of 10 > 0.3), after which every request goes to "live".
        var dead = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations.Single(d => d.DestinationId == "dead");
        Assert.Equal(10, statuses.Count(s => s == HttpStatusCode.BadGateway));
        Assert.All(statuses.Skip(19), s => Assert.Equal(HttpStatusCode.OK, s));
        Assert.Equal(DestinationHealth.Unhealthy, dead.Health);
    }

    // NOTE: the activity timeout runs on a FakeTimeProvider that only this test moves. On the wall clock (0.5 s), a
    // loaded 2-core machine (thread-pool starvation adds a thread per ~0.5 s) sometimes kept the last request's backend
    // headers from arriving in time, and the proxy rightly answered 504: the race was the test's, not the proxy's.
    [Fact]
    public async Task PassiveHealth_SseStreamsHitActivityTimeout_DestinationStaysHealthy()
    {
        var started = 0;
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            Interlocked.Increment(ref started);
            context.Response.ContentType = "text/event-stream";
            await context.Response.StartAsync();
            await context.Response.Body.FlushAsync();
            // Then quiet: an idle stream, as SSE streams between events are.
            await Task.Delay(Timeout.Infinite, context.RequestAborted).ContinueWith(_ => { }, TaskScheduler.Default);
        }));
        var time = new FakeTimeProvider();
        var errors = new ConcurrentQueue<ForwarderError>();
        var allRecorded = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var activityTimeout = TimeSpan.FromSeconds(10); // short of the servers' own 30 s timeouts, which may share the fake clock
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url)
            .Set("Routes:r1:ActivityTimeout", "00:00:10")
            .Set("Clusters:c1:HealthCheck:Passive:Enabled", "true");
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Services.AddSingleton<TimeProvider>(time);
                b.Configuration.AddInMemoryCollection(config);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
                ProxyTestHost.NeedsPipeline(b.Services);
            },
            app =>
            {
                app.Use(async (context, next) =>
                {
                    await next(context);
                    errors.Enqueue(context.Features.Get<IForwarderErrorFeature>()?.Error ?? ForwarderError.None);
                    if (errors.Count == 12)
                    {
                        allRecorded.TrySetResult();
                    }
                });
                app.MapProxyForwarding();
            });
        using var http = proxy.CreateClient();

        // 12 streams (more than the minimal count of 10), all open and idle: the client has each one's headers. Nothing
        // re-arms an activity timer between the headers and the first body byte, so every timer is due at start + 10 s.
        var responses = await Task.WhenAll(Enumerable.Range(0, 12).Select(_ =>
            http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard)));
        Assert.All(responses, r => Assert.Equal(HttpStatusCode.OK, r.StatusCode));
        time.Advance(activityTimeout);
        await Task.WhenAll(responses.Select(async response =>
        {
            using (response)
            {
                try
                {
                    await response.Content.ReadAsStringAsync().WaitAsync(Guard);
                }
                catch (HttpRequestException)
                {
                    // The proxy aborts the client response when the backend stream times out.
                }
                catch (IOException)
                {
                }
            }
        }));
        // The middleware records after the proxy finished each exchange, which may trail the client.
        await allRecorded.Task.WaitAsync(Guard);

        var destination = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations[0];
        Assert.All(errors, e => Assert.Equal(ForwarderError.ResponseBodyTimedOut, e));
        Assert.Equal(12, Volatile.Read(ref started));
        Assert.Equal(DestinationHealth.Unknown, destination.Health);
        // The clock stands still from here: this request is judged on the destination's health alone.
        using var next = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);
        Assert.Equal(HttpStatusCode.OK, next.StatusCode);
        Assert.Equal(13, Volatile.Read(ref started));
    }

    [Fact]
    public async Task AvailableDestinations_HealthyAndUnknownAllUnhealthy_503WithReason()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("ok")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "d1", backend.Url));
        using var http = proxy.CreateClient();
        proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations[0].Health = DestinationHealth.Unhealthy;

        using var response = await http.GetAsync("/");

        Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
        Assert.Contains("no available destination: all 1 are unhealthy (AvailableDestinationsPolicy HealthyAndUnknown)", await response.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task AvailableDestinations_HealthyOrPanicAllUnhealthy_ForwardsAnyway()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("ok")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "d1", backend.Url)
            .Set("Clusters:c1:HealthCheck:AvailableDestinationsPolicy", "HealthyOrPanic"));
        using var http = proxy.CreateClient();
        proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations[0].Health = DestinationHealth.Unhealthy;

        Assert.Equal("ok", await http.GetStringAsync("/"));
    }

    [Fact]
    public async Task PassiveHealth_FirstFailurePolicy_SkippedAfterFirstFailure()
    {
        await using var live = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("live")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "dead", Proxies.DeadAddress()).Destination("c1", "live", live.Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:HealthCheck:Passive:Enabled", "true")
            .Set("Clusters:c1:HealthCheck:Passive:Policy", "FirstFailure")
            .Set("Clusters:c1:HealthCheck:Passive:ReactivationPeriod", "00:10:00"));
        using var http = proxy.CreateClient();

        var statuses = new List<HttpStatusCode>();
        for (var i = 0; i < 8; i++)
        {
            using var response = await http.GetAsync("/");
            statuses.Add(response.StatusCode);
        }

        // Round robin reaches "dead" once; after that it is sat out.
        Assert.Equal(1, statuses.Count(s => s == HttpStatusCode.BadGateway));
        Assert.Equal(7, statuses.Count(s => s == HttpStatusCode.OK));
    }

    [Theory]
    [InlineData(true)]   // the call's own grpc-timeout expired: the client's choice, not the destination's fault
    [InlineData(false)]  // the route's Timeout expired: the destination was too slow
    public async Task PassiveHealth_FirstFailure_ClientsOwnGrpcDeadlineDoesNotSitTheDestinationOut(bool clientDeadline)
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(context =>
            context.Request.Path == "/ok" ? context.Response.WriteAsync("ok") : Task.Delay(Timeout.Infinite, context.RequestAborted)), TestProtocol.Http2);
        var firstDone = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true, requestCompleted: () => firstDone.TrySetResult(), extra: c =>
        {
            c.Set("Clusters:c1:HealthCheck:Passive:Enabled", "true")
             .Set("Clusters:c1:HealthCheck:Passive:Policy", "FirstFailure")
             .Set("Clusters:c1:HealthCheck:Passive:ReactivationPeriod", "00:10:00");
            if (!clientDeadline)
            {
                c.Set("Routes:r1:Timeout", "00:00:00.2");
            }
        });
        using var http = proxy.CreateClient();
        using var call = ErrorTests.GrpcRequest();
        if (clientDeadline)
        {
            call.Headers.Add("grpc-timeout", "200m");
        }

        using var timedOut = await http.SendAsync(call).WaitAsync(Guard);
        // The outcome is recorded after the response went out, before the server is done with the request.
        await firstDone.Task.WaitAsync(Guard);
        var destination = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations[0];
        using var next = new HttpRequestMessage(HttpMethod.Get, "/ok") { Version = HttpVersion.Version20, VersionPolicy = HttpVersionPolicy.RequestVersionExact };
        using var after = await http.SendAsync(next).WaitAsync(Guard);

        if (clientDeadline)
        {
            Assert.Equal("4", timedOut.Headers.GetValues("grpc-status").Single()); // DEADLINE_EXCEEDED
            Assert.NotEqual(DestinationHealth.Unhealthy, destination.Health);
            Assert.Equal(HttpStatusCode.OK, after.StatusCode);
        }
        else
        {
            Assert.Equal(DestinationHealth.Unhealthy, destination.Health);
            Assert.Equal(HttpStatusCode.ServiceUnavailable, after.StatusCode);
        }
    }

    private static async Task<List<string>> Bodies(HttpClient http, int count)
    {
        var bodies = new List<string>();
        for (var i = 0; i < count; i++)
        {
            bodies.Add(await http.GetStringAsync("/"));
        }

        return bodies;
    }
}
