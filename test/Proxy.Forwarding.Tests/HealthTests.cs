using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
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

    [Fact]
    public async Task PassiveHealth_SseStreamsHitActivityTimeout_DestinationStaysHealthy()
    {
        var started = 0;
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            if (context.Request.Path == "/warm")
            {
                await context.Response.WriteAsync("warm");
                return;
            }

            Interlocked.Increment(ref started);
            context.Response.ContentType = "text/event-stream";
            await context.Response.WriteAsync("data: hello\n\n");
            await context.Response.Body.FlushAsync();
            // Then quiet: an idle stream, as SSE streams between events are.
            await Task.Delay(Timeout.Infinite, context.RequestAborted).ContinueWith(_ => { }, TaskScheduler.Default);
        }));
        var errors = new ConcurrentQueue<ForwarderError>();
        var allRecorded = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url)
            .Set("Routes:r1:ActivityTimeout", "00:00:00.5")
            .Set("Clusters:c1:HealthCheck:Passive:Enabled", "true");
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Configuration.AddInMemoryCollection(config);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            },
            app =>
            {
                app.Use(async (context, next) =>
                {
                    await next(context);
                    if (context.Request.Path != "/events")
                    {
                        return;
                    }

                    errors.Enqueue(context.Features.Get<IForwarderErrorFeature>()?.Error ?? ForwarderError.None);
                    if (errors.Count == 12)
                    {
                        allRecorded.TrySetResult();
                    }
                });
                app.MapProxyForwarding();
            });
        using var http = proxy.CreateClient();
        // A cold proxy may need longer than the short activity timeout for its first exchange.
        (await http.GetAsync("/warm").WaitAsync(Guard)).Dispose();

        // 12 streams (more than the minimal count of 10), each cut by the route's activity timeout.
        await Task.WhenAll(Enumerable.Range(0, 12).Select(async _ =>
        {
            using var response = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);
            using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
            Assert.Equal("data: hello", await reader.ReadLineAsync().WaitAsync(Guard));
            try
            {
                await reader.ReadToEndAsync().WaitAsync(Guard);
            }
            catch (HttpRequestException)
            {
                // The proxy aborts the client response when the backend stream times out.
            }
            catch (IOException)
            {
            }
        }));
        // The middleware records after the proxy finished each exchange, which may trail the client.
        await allRecorded.Task.WaitAsync(Guard);

        var destination = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations[0];
        Assert.All(errors, e => Assert.Equal(ForwarderError.ResponseBodyTimedOut, e));
        Assert.Equal(12, Volatile.Read(ref started));
        Assert.Equal(DestinationHealth.Unknown, destination.Health);
        using var next = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);
        Assert.Equal(HttpStatusCode.OK, next.StatusCode);
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
