using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
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

    [Fact]
    public async Task PassiveHealth_DestinationRefusesConnections_SkippedAfterFirstFailure()
    {
        await using var live = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("live")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "dead", Proxies.DeadAddress()).Destination("c1", "live", live.Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:HealthCheck:Passive:Enabled", "true")
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
