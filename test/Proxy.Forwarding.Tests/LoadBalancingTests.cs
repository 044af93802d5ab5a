using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.LoadBalancing;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class LoadBalancingTests
{
    private const int Picks = 12_000;

    private static readonly ILoadBalancingPolicy[] All =
    [
        new PowerOfTwoChoicesPolicy(), new RoundRobinPolicy(), new RandomPolicy(), new LeastRequestsPolicy(), new FirstAlphabeticalPolicy(),
    ];

    private static ClusterState Cluster(string policy, params string[] destinations) => ClusterWithAvailability(policy, null, destinations);

    private static ClusterState ClusterWithAvailability(string policy, string? availability, params string[] destinations) =>
        BackendPoolFactory.Build(new ClusterConfig
        {
            ClusterId = "c",
            LoadBalancingPolicy = policy,
            HealthCheck = availability is null ? null : new HealthCheckConfig { AvailableDestinationsPolicy = availability },
            Destinations = destinations.ToDictionary(d => d, d => new DestinationConfig { Address = "http://127.0.0.1:1/" }),
        }, All.ToDictionary(p => p.Name, StringComparer.OrdinalIgnoreCase));

    private static Dictionary<string, int> Distribution(ClusterState cluster, int picks = Picks)
    {
        var context = new DefaultHttpContext();
        var counts = cluster.Destinations.ToDictionary(d => d.DestinationId, _ => 0);
        for (var i = 0; i < picks; i++)
        {
            var picked = cluster.LoadBalancer.PickDestination(context, cluster, cluster.AvailableDestinations())!;
            counts[picked.DestinationId]++;
        }

        return counts;
    }

    [Fact]
    public void RoundRobin_ThreeDestinations_ExactlyEvenInOrder()
    {
        var cluster = Cluster("RoundRobin", "a", "b", "c");
        var context = new DefaultHttpContext();

        var order = Enumerable.Range(0, 6).Select(_ => cluster.LoadBalancer.PickDestination(context, cluster, cluster.Destinations)!.DestinationId);

        Assert.Equal(["a", "b", "c", "a", "b", "c"], order);
        Assert.All(Distribution(cluster).Values, count => Assert.Equal(Picks / 3, count));
    }

    [Fact]
    public void Random_FourDestinations_RoughlyUniform()
    {
        var counts = Distribution(Cluster("Random", "a", "b", "c", "d"));

        // Expected 3000 each; 2700..3300 is > 6 standard deviations wide.
        Assert.All(counts.Values, count => Assert.InRange(count, 2700, 3300));
    }

    [Fact]
    public void PowerOfTwoChoices_IdleDestinations_RoughlyUniform()
    {
        var counts = Distribution(Cluster("PowerOfTwoChoices", "a", "b", "c"));

        Assert.All(counts.Values, count => Assert.InRange(count, 3600, 4400));
    }

    [Fact]
    public void PowerOfTwoChoices_OneBusyDestination_NeverPickedAgainstIdleOnes()
    {
        var cluster = Cluster("PowerOfTwoChoices", "a", "b", "c");
        for (var i = 0; i < 5; i++)
        {
            cluster.Destinations[0].RequestStarted();
        }

        var counts = Distribution(cluster);

        // Whenever "a" is drawn its partner is idle and wins.
        Assert.Equal(0, counts["a"]);
        Assert.InRange(counts["b"], 5400, 6600);
    }

    [Fact]
    public void PowerOfTwoChoices_DefaultPolicy_WhenUnset()
    {
        Assert.IsType<PowerOfTwoChoicesPolicy>(Cluster(null!, "a").LoadBalancer);
    }

    [Fact]
    public void LeastRequests_PicksFewestInFlight()
    {
        var cluster = Cluster("LeastRequests", "a", "b", "c");
        cluster.Destinations[0].RequestStarted();
        cluster.Destinations[0].RequestStarted();
        cluster.Destinations[1].RequestStarted();

        var counts = Distribution(cluster, 100);

        Assert.Equal(100, counts["c"]);
    }

    [Fact]
    public void LeastRequests_Ties_FirstByName()
    {
        Assert.Equal(Picks, Distribution(Cluster("LeastRequests", "b", "a"))["a"]);
    }

    [Fact]
    public void FirstAlphabetical_AlwaysFirstAvailable()
    {
        var cluster = Cluster("FirstAlphabetical", "zeta", "alpha", "mid");
        Assert.Equal(Picks, Distribution(cluster)["alpha"]);

        cluster.Destinations.Single(d => d.DestinationId == "alpha").Health = DestinationHealth.Unhealthy;
        Assert.Equal(Picks, Distribution(cluster)["mid"]);
    }

    [Theory]
    [InlineData(null, 0)]
    [InlineData("HealthyAndUnknown", 0)]
    [InlineData("HealthyOrPanic", 2)]
    [InlineData("healthyorpanic", 2)]
    public void AvailableDestinations_AllUnhealthy_FollowsPolicy(string? policy, int expected)
    {
        var cluster = ClusterWithAvailability("RoundRobin", policy, "a", "b");
        foreach (var d in cluster.Destinations)
        {
            d.Health = DestinationHealth.Unhealthy;
        }

        Assert.Equal(expected, cluster.AvailableDestinations().Count);
    }

    [Theory]
    [InlineData("HealthyAndUnknown")]
    [InlineData("HealthyOrPanic")]
    public void AvailableDestinations_SomeUnhealthy_HealthyAndUnknownOnly(string policy)
    {
        var cluster = ClusterWithAvailability("RoundRobin", policy, "healthy", "sick", "unprobed");
        cluster.Destinations.Single(d => d.DestinationId == "healthy").Health = DestinationHealth.Healthy;
        cluster.Destinations.Single(d => d.DestinationId == "sick").Health = DestinationHealth.Unhealthy;

        Assert.Equal(["healthy", "unprobed"], cluster.AvailableDestinations().Select(d => d.DestinationId));
    }

    [Fact]
    public async Task RoundRobin_EndToEnd_RequestsSpreadOverBackends()
    {
        await using var a = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("a")));
        await using var b = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("b")));
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "d1", a.Url).Destination("c1", "d2", b.Url).Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin"));
        using var http = proxy.CreateClient();

        var bodies = new List<string>();
        for (var i = 0; i < 6; i++)
        {
            bodies.Add(await http.GetStringAsync("/"));
        }

        Assert.Equal(3, bodies.Count(x => x == "a"));
        Assert.Equal(3, bodies.Count(x => x == "b"));
    }
}
