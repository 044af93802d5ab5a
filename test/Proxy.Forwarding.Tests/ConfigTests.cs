using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class ConfigTests
{
    private static List<string> Validate(ProxyConfigDictionary values) => values.ReadAndValidate();

    private static ProxyConfigDictionary Valid() =>
        new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:5000/");

    [Fact]
    public void Validate_ValidConfig_NoErrors()
    {
        Assert.Empty(Validate(Valid()));
    }

    [Fact]
    public void Read_FullYarpSchema_BindsEveryField()
    {
        var values = Valid()
            .Set("Routes:r1:Order", "5")
            .Set("Routes:r1:Timeout", "00:00:30")
            .Set("Routes:r1:ActivityTimeout", "00:02:00")
            .Set("Routes:r1:Match:Hosts:0", "example.com")
            .Set("Routes:r1:Match:Methods:0", "GET")
            .Set("Routes:r1:Match:Headers:0:Name", "x-tenant")
            .Set("Routes:r1:Match:Headers:0:Values:0", "a")
            .Set("Routes:r1:Match:Headers:0:Mode", "HeaderPrefix")
            .Set("Routes:r1:Match:QueryParameters:0:Name", "v")
            .Set("Routes:r1:Match:QueryParameters:0:Mode", "Exists")
            .Set("Routes:r1:Metadata:owner", "team")
            .Set("Routes:r1:Transforms:0:PathPrefix", "/api")
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:Destinations:d1:Health", "http://127.0.0.1:5001/")
            .Set("Clusters:c1:HttpClient:MaxConnectionsPerServer", "10")
            .Set("Clusters:c1:HttpClient:EnableMultipleHttp2Connections", "false")
            .Set("Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination", "100")
            .Set("Clusters:c1:HttpClient:QueueTimeout", "00:00:02")
            .Set("Clusters:c1:HttpRequest:ActivityTimeout", "00:01:00")
            .Set("Clusters:c1:HttpRequest:Version", "2")
            .Set("Clusters:c1:HttpRequest:VersionPolicy", "RequestVersionExact")
            .Set("Clusters:c1:HealthCheck:Active:Enabled", "true")
            .Set("Clusters:c1:HealthCheck:Active:Interval", "00:00:10")
            .Set("Clusters:c1:Metadata:tier", "gold");
        var errors = new List<string>();

        var config = ConfigurationReader.Read(new ConfigurationBuilder().AddInMemoryCollection(values).Build().GetSection("ReverseProxy"), errors);
        ConfigValidator.Validate(config, "ReverseProxy", errors);

        Assert.Empty(errors);
        var route = Assert.Single(config.Routes);
        Assert.Equal(("r1", "c1", 5), (route.RouteId, route.ClusterId, route.Order));
        Assert.Equal(TimeSpan.FromSeconds(30), route.Timeout);
        Assert.Equal(TimeSpan.FromMinutes(2), route.ActivityTimeout);
        Assert.Equal(["example.com"], route.Match.Hosts!);
        Assert.Equal(HeaderMatchMode.HeaderPrefix, route.Match.Headers![0].Mode);
        Assert.Equal(QueryParameterMatchMode.Exists, route.Match.QueryParameters![0].Mode);
        Assert.Equal("team", route.Metadata!["owner"]);
        Assert.Equal("/api", route.Transforms![0]["PathPrefix"]);
        var cluster = Assert.Single(config.Clusters);
        Assert.Equal("RoundRobin", cluster.LoadBalancingPolicy);
        Assert.Equal("http://127.0.0.1:5001/", cluster.Destinations!["d1"].Health);
        Assert.Equal(10, cluster.HttpClient!.MaxConnectionsPerServer);
        Assert.False(cluster.HttpClient.EnableMultipleHttp2Connections);
        Assert.Equal(100, cluster.HttpClient.MaxConcurrentRequestsPerDestination);
        Assert.Equal(TimeSpan.FromMinutes(1), cluster.HttpRequest!.ActivityTimeout);
        Assert.Equal("RequestVersionExact", cluster.HttpRequest.VersionPolicy);
        Assert.True(cluster.HealthCheck!.Active!.Enabled);
        Assert.Equal("gold", cluster.Metadata!["tier"]);
    }

    [Theory]
    [InlineData("Routes:r1:ClusterId", "x", "ReverseProxy:Routes:r1:ClusterId: cluster 'x' does not exist")]
    [InlineData("Routes:r1:Timeout", "soon", "ReverseProxy:Routes:r1:Timeout: 'soon' is not a valid TimeSpan")]
    [InlineData("Routes:r1:Order", "first", "ReverseProxy:Routes:r1:Order: 'first' is not a valid integer")]
    [InlineData("Routes:r1:Match:Path", "/api/{", "ReverseProxy:Routes:r1:Match:Path: '/api/{' is not a valid route template")]
    [InlineData("Routes:r1:Match:Methods:0", "GE T", "ReverseProxy:Routes:r1:Match:Methods:0: 'GE T' is not a valid HTTP method")]
    [InlineData("Routes:r1:Transforms:0:PathPrefixx", "/a", "ReverseProxy:Routes:r1:Transforms:0: unknown transform 'PathPrefixx'")]
    [InlineData("Routes:r1:Transforms:0:PathPrefix", "a", "ReverseProxy:Routes:r1:Transforms:0:PathPrefix: 'a' must start with '/'")]
    [InlineData("Clusters:c1:Destinations:d1:Address", "ftp://x", "ReverseProxy:Clusters:c1:Destinations:d1:Address: 'ftp://x' is not an absolute http:// or https:// address")]
    [InlineData("Clusters:c1:Destinations:d1:Address", "http://127.0.0.1:70000/", "ReverseProxy:Clusters:c1:Destinations:d1:Address: 'http://127.0.0.1:70000/' has port 70000, out of range (1-65535)")]
    [InlineData("Clusters:c1:Destinations:d1:Health", "https://[::1]:99999", "ReverseProxy:Clusters:c1:Destinations:d1:Health: 'https://[::1]:99999' has port 99999, out of range (1-65535)")]
    [InlineData("Clusters:c1:LoadBalancingPolicy", "Fastest", "ReverseProxy:Clusters:c1:LoadBalancingPolicy: 'Fastest' is not a known policy")]
    [InlineData("Clusters:c1:HttpRequest:Version", "4", "ReverseProxy:Clusters:c1:HttpRequest:Version: '4' is not one of")]
    [InlineData("Clusters:c1:HttpRequest:VersionPolicy", "Any", "ReverseProxy:Clusters:c1:HttpRequest:VersionPolicy: 'Any' is not one of")]
    [InlineData("Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination", "0", "ReverseProxy:Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination: must be positive")]
    [InlineData("Clusters:c1:HttpClient:EnableMultipleHttp2Connections", "yes", "ReverseProxy:Clusters:c1:HttpClient:EnableMultipleHttp2Connections: 'yes' is not 'true' or 'false'")]
    [InlineData("Clusters:c1:HttpClient:KeepAlivePingDelay", "00:00:00.100", "ReverseProxy:Clusters:c1:HttpClient:KeepAlivePingDelay: must be at least 00:00:01")]
    [InlineData("Clusters:c1:Transport", "Quic", "ReverseProxy:Clusters:c1:Transport: 'Quic' is not one of Native, HttpClient")]
    [InlineData("Clusters:c1:HealthCheck:AvailableDestinationsPolicy", "Any", "ReverseProxy:Clusters:c1:HealthCheck:AvailableDestinationsPolicy: 'Any' is not a known policy (HealthyAndUnknown, HealthyOrPanic)")]
    [InlineData("Clusters:c1:HealthCheck:Active:Policy", "Sometimes", "ReverseProxy:Clusters:c1:HealthCheck:Active:Policy: 'Sometimes' is not a known policy (ConsecutiveFailures)")]
    [InlineData("Clusters:c1:HealthCheck:Passive:Policy", "FailureRate", "ReverseProxy:Clusters:c1:HealthCheck:Passive:Policy: 'FailureRate' is not a known policy (TransportFailureRate, FirstFailure)")]
    [InlineData("Clusters:c1:HealthCheck:Passive:ReactivationPeriod", "00:00:00", "ReverseProxy:Clusters:c1:HealthCheck:Passive:ReactivationPeriod: must be positive")]
    [InlineData("Clusters:c1:HealthCheck:Active:Interval", "-00:00:01", "ReverseProxy:Clusters:c1:HealthCheck:Active:Interval: must be positive")]
    [InlineData("Clusters:c1:Metadata:TransportFailureRateHealthPolicy.RateLimit", "1.5", "ReverseProxy:Clusters:c1:Metadata:TransportFailureRateHealthPolicy.RateLimit: '1.5' is not a number from 0 to 1")]
    [InlineData("Clusters:c1:Metadata:ConsecutiveFailuresHealthPolicy.Threshold", "0", "ReverseProxy:Clusters:c1:Metadata:ConsecutiveFailuresHealthPolicy.Threshold: '0' is not a positive integer")]
    public void Validate_BadValue_ErrorNamesTheKey(string key, string value, string expected)
    {
        var errors = Validate(Valid().Set(key, value));

        Assert.Contains(errors, e => e.StartsWith(expected, StringComparison.Ordinal));
    }

    [Fact]
    public void Validate_NativeTransportWithoutTheRelay_ErrorNamesTheKey()
    {
        var errors = Validate(Valid().Set("Clusters:c1:Transport", "Native"));

        Assert.Contains(errors, e => e.StartsWith("ReverseProxy:Clusters:c1:Transport: 'Native' needs the native relay", StringComparison.Ordinal));
    }

    [Fact]
    public void Validate_KnownHealthPolicies_NoErrors()
    {
        var errors = Validate(Valid()
            .Set("Clusters:c1:HealthCheck:AvailableDestinationsPolicy", "HealthyOrPanic")
            .Set("Clusters:c1:HealthCheck:Active:Policy", "ConsecutiveFailures")
            .Set("Clusters:c1:HealthCheck:Passive:Policy", "transportfailurerate")
            .Set("Clusters:c1:Metadata:TransportFailureRateHealthPolicy.RateLimit", "0.5")
            .Set("Clusters:c1:Metadata:ConsecutiveFailuresHealthPolicy.Threshold", "3"));

        Assert.Empty(errors);
    }

    [Fact]
    public void Validate_HeaderMatcherWithoutValues_ErrorNamesTheMatcher()
    {
        var errors = Validate(Valid().Set("Routes:r1:Match:Headers:0:Name", "x-a"));

        Assert.Contains("ReverseProxy:Routes:r1:Match:Headers:0:Values: at least one value is required for mode ExactHeader.", errors);
    }

    [Fact]
    public void Validate_RouteWithoutPathOrHosts_Error()
    {
        var errors = Validate(new ProxyConfigDictionary().Route("r1", "c1", path: null).Destination("c1", "d1", "http://127.0.0.1:1/"));

        Assert.Contains("ReverseProxy:Routes:r1:Match: needs a Path, a PathPrefix or Hosts.", errors);
    }

    [Fact]
    public void Startup_InvalidFirstConfig_ThrowsWithOffendingKey()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Configuration.AddInMemoryCollection(Valid().Set("Routes:r1:ClusterId", "x"));
        builder.Services.AddProxyForwarding().LoadFromConfig(builder.Configuration.GetSection("ReverseProxy"));
        using var app = builder.Build();

        var error = Assert.Throws<ProxyConfigException>(() => app.MapProxyForwarding());

        Assert.Contains("ReverseProxy:Routes:r1:ClusterId: cluster 'x' does not exist", error.Message);
    }

    [Fact]
    public async Task Reload_ChangedDestination_NewRequestsGoToNewBackend()
    {
        await using var first = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("first")));
        await using var second = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("second")));
        IConfigurationRoot? root = null;
        await using var proxy = await ProxyTestHost.StartProxyAsync(b =>
        {
            b.Configuration.AddInMemoryCollection(new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", first.Url));
            root = b.Configuration;
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding());
        using var http = proxy.CreateClient();
        Assert.Equal("first", await http.GetStringAsync("/"));

        root!["ReverseProxy:Clusters:c1:Destinations:d1:Address"] = second.Url;
        root.Reload();

        Assert.Equal("second", await http.GetStringAsync("/"));
    }

    [Fact]
    public async Task Reload_InvalidConfig_KeepsLastGoodConfig()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("ok")));
        IConfigurationRoot? root = null;
        await using var proxy = await ProxyTestHost.StartProxyAsync(b =>
        {
            b.Configuration.AddInMemoryCollection(new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url));
            root = b.Configuration;
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding());
        using var http = proxy.CreateClient();
        var manager = proxy.Services.GetRequiredService<ProxyStateManager>();
        var before = manager.Current;

        root!["ReverseProxy:Routes:r1:ClusterId"] = "missing";
        root.Reload();

        Assert.Same(before, manager.Current);
        Assert.Contains("ReverseProxy:Routes:r1:ClusterId: cluster 'missing' does not exist", manager.LastReloadError);
        Assert.Equal("ok", await http.GetStringAsync("/"));
    }

    [Fact]
    public async Task InMemory_Update_RebuildsOnlyChangedRoutesAndClusters()
    {
        await using var a = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("a")));
        await using var b = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("b")));
        var clusterA = new ClusterConfig { ClusterId = "ca", Destinations = new Dictionary<string, DestinationConfig> { ["d"] = new() { Address = a.Url } } };
        var clusterB = new ClusterConfig { ClusterId = "cb", Destinations = new Dictionary<string, DestinationConfig> { ["d"] = new() { Address = b.Url } } };
        var routeA = new RouteConfig { RouteId = "ra", ClusterId = "ca", Match = new RouteMatch { PathPrefix = "/a" } };
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            builder => builder.Services.AddProxyForwarding().LoadFromMemory([routeA], [clusterA, clusterB]),
            app => app.MapProxyForwarding());
        using var http = proxy.CreateClient();
        var manager = proxy.Services.GetRequiredService<ProxyStateManager>();
        var before = manager.Current;
        Assert.Equal(HttpStatusCode.NotFound, (await http.GetAsync("/b")).StatusCode);

        var routeB = new RouteConfig { RouteId = "rb", ClusterId = "cb", Match = new RouteMatch { PathPrefix = "/b" } };
        proxy.Services.GetRequiredService<InMemoryConfigProvider>().Update(
            [routeA with { Transforms = null }, routeB],
            [clusterA with { Destinations = new Dictionary<string, DestinationConfig> { ["d"] = new() { Address = a.Url } } }, clusterB]);

        Assert.Same(before.Routes["ra"], manager.Current.Routes["ra"]);
        Assert.Same(before.Clusters["ca"], manager.Current.Clusters["ca"]);
        Assert.Equal("a", await http.GetStringAsync("/a/x"));
        Assert.Equal("b", await http.GetStringAsync("/b"));
    }
}
