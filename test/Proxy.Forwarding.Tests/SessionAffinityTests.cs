using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// Session affinity over real sockets: two destinations taking turns (RoundRobin), so only affinity keeps a client on one.
/// </summary>
public sealed class SessionAffinityTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(30);
    private const string KeyName = "aff";

    private sealed record Setup(TestApp A, TestApp B, TestApp Proxy, HttpClient Http) : IAsyncDisposable
    {
        public async ValueTask DisposeAsync()
        {
            Http.Dispose();
            await Proxy.DisposeAsync();
            await A.DisposeAsync();
            await B.DisposeAsync();
        }

        public DestinationState Destination(string id) =>
            Proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].Destinations.Single(d => d.DestinationId == id);
    }

    private static async Task<Setup> StartAsync(string policy, string? failurePolicy = null)
    {
        var a = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("a")));
        var b = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("b")));
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "a", a.Url).Destination("c1", "b", b.Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:SessionAffinity:Enabled", "true")
            .Set("Clusters:c1:SessionAffinity:Policy", policy)
            .Set("Clusters:c1:SessionAffinity:AffinityKeyName", KeyName)
            .Set("Clusters:c1:SessionAffinity:Cookie:SameSite", "Lax");
        if (failurePolicy is not null)
        {
            config.Set("Clusters:c1:SessionAffinity:FailurePolicy", failurePolicy);
        }

        var proxy = await Proxies.StartConfiguredAsync(config);
        return new Setup(a, b, proxy, proxy.CreateClient());
    }

    /// <summary>Sends a request with the key (when given); returns who answered and the key the response set, if any.</summary>
    private static async Task<(HttpStatusCode Status, string Body, string? Key)> SendAsync(Setup setup, string policy, string? key)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, "/x");
        if (key is not null)
        {
            request.Headers.Add(policy == "CustomHeader" ? KeyName : "Cookie", policy == "CustomHeader" ? key : $"{KeyName}={key}");
        }

        using var response = await setup.Http.SendAsync(request).WaitAsync(Guard);
        return (response.StatusCode, await response.Content.ReadAsStringAsync(), KeyOf(response, policy));
    }

    private static string? KeyOf(HttpResponseMessage response, string policy)
    {
        if (policy == "CustomHeader")
        {
            return response.Headers.TryGetValues(KeyName, out var values) ? values.Single() : null;
        }

        var cookie = response.Headers.TryGetValues("Set-Cookie", out var cookies) ? cookies.SingleOrDefault(c => c.StartsWith(KeyName + "=", StringComparison.Ordinal)) : null;
        return cookie?[(KeyName.Length + 1)..cookie.IndexOf(';', StringComparison.Ordinal)];
    }

    [Theory]
    [InlineData("Cookie")]
    [InlineData("CustomHeader")]
    [InlineData("HashCookie")]
    [InlineData("ArrCookie")]
    public async Task FirstResponseSetsKey_NextRequestsWithIt_SameDestination(string policy)
    {
        await using var setup = await StartAsync(policy);

        var first = await SendAsync(setup, policy, key: null);
        var following = new List<(HttpStatusCode, string, string?)>();
        for (var i = 0; i < 4; i++)
        {
            following.Add(await SendAsync(setup, policy, first.Key));
        }

        var withoutKey = await SendAsync(setup, policy, key: null);

        Assert.NotNull(first.Key);
        Assert.NotEqual(first.Body, first.Key); // Cookie and CustomHeader keys are protected, hashes are hashes
        Assert.All(following, r => Assert.Equal((HttpStatusCode.OK, first.Body, (string?)null), r)); // kept, not re-set
        Assert.NotEqual(first.Body, withoutKey.Body); // without the key, round robin moves on
    }

    [Fact]
    public async Task CookieAttributes_FromConfig()
    {
        await using var setup = await StartAsync("Cookie");
        using var response = await setup.Http.GetAsync("/x").WaitAsync(Guard);

        var cookie = response.Headers.GetValues("Set-Cookie").Single();

        Assert.Contains("path=/", cookie);
        Assert.Contains("samesite=lax", cookie);
        Assert.Contains("httponly", cookie);
        Assert.DoesNotContain("secure", cookie); // SameAsRequest on a cleartext request
    }

    [Theory]
    [InlineData("Cookie")]
    [InlineData("CustomHeader")]
    [InlineData("HashCookie")]
    [InlineData("ArrCookie")]
    public async Task AffinitizedDestinationUnhealthy_Redistribute_OtherDestinationAndNewKey(string policy)
    {
        await using var setup = await StartAsync(policy, "Redistribute");
        var first = await SendAsync(setup, policy, key: null);

        setup.Destination(first.Body).Health = DestinationHealth.Unhealthy;
        var moved = await SendAsync(setup, policy, first.Key);
        var stays = await SendAsync(setup, policy, moved.Key);

        Assert.Equal(HttpStatusCode.OK, moved.Status);
        Assert.NotEqual(first.Body, moved.Body);
        Assert.NotNull(moved.Key);
        Assert.NotEqual(first.Key, moved.Key);
        Assert.Equal((HttpStatusCode.OK, moved.Body), (stays.Status, stays.Body));
    }

    [Fact]
    public async Task AffinitizedDestinationUnhealthy_Return503Error_503()
    {
        await using var setup = await StartAsync("HashCookie", "Return503Error");
        var first = await SendAsync(setup, "HashCookie", key: null);

        setup.Destination(first.Body).Health = DestinationHealth.Unhealthy;
        var refused = await SendAsync(setup, "HashCookie", first.Key);

        Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.Status);
        Assert.Contains("session affinity key names no available destination", refused.Body);
    }

    [Fact]
    public async Task AffinitizedDestinationRemovedOnReload_Redistribute()
    {
        // The Setup below owns (and disposes) the backends and the proxy.
        var a = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("a")));
        var b = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("b")));
        var affinity = new SessionAffinityConfig { Enabled = true, Policy = "Cookie", AffinityKeyName = KeyName };
        ClusterConfig Cluster(params TestApp[] backends) => new()
        {
            ClusterId = "c1",
            SessionAffinity = affinity,
            Destinations = backends.ToDictionary(x => x == a ? "a" : "b", x => new DestinationConfig { Address = x.Url }),
        };
        RouteConfig[] routes = [new() { RouteId = "r1", ClusterId = "c1", Match = new RouteMatch { Path = "/{**all}" } }];
        var proxy = await ProxyTestHost.StartProxyAsync(
            builder => builder.Services.AddProxyForwarding().LoadFromMemory(routes, [Cluster(a, b)]), app => app.MapProxyForwarding());
        await using var setup = new Setup(a, b, proxy, proxy.CreateClient());
        var first = await SendAsync(setup, "Cookie", key: null);
        var manager = proxy.Services.GetRequiredService<ProxyStateManager>();
        var attempt = manager.NextReloadAttempt;

        proxy.Services.GetRequiredService<InMemoryConfigProvider>().Update(routes, [Cluster(first.Body == "a" ? b : a)]);
        await attempt.WaitAsync(Guard);
        var moved = await SendAsync(setup, "Cookie", first.Key);

        Assert.Null(manager.LastReloadError);
        Assert.Equal(HttpStatusCode.OK, moved.Status);
        Assert.NotEqual(first.Body, moved.Body);
        Assert.NotNull(moved.Key);
    }

    [Fact]
    public async Task TamperedProtectedKey_Redistribute_NewKey()
    {
        await using var setup = await StartAsync("Cookie");

        var forged = await SendAsync(setup, "Cookie", "bm90LXByb3RlY3RlZA");

        Assert.Equal(HttpStatusCode.OK, forged.Status);
        Assert.NotNull(forged.Key);
    }

    [Fact]
    public void Read_EveryAffinityKey_Bound()
    {
        var values = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:1/");
        foreach (var (key, value) in new[]
        {
            ("Enabled", "true"), ("Policy", "ArrCookie"), ("FailurePolicy", "Return503Error"), ("AffinityKeyName", "k"),
            ("Cookie:Domain", "example.com"), ("Cookie:Expiration", "01:00:00"), ("Cookie:HttpOnly", "false"), ("Cookie:IsEssential", "true"),
            ("Cookie:MaxAge", "00:30:00"), ("Cookie:Path", "/app"), ("Cookie:SameSite", "Strict"), ("Cookie:SecurePolicy", "Always"),
        })
        {
            values.Set("Clusters:c1:SessionAffinity:" + key, value);
        }

        var errors = new List<string>();
        var config = ConfigurationReader.Read(new ConfigurationBuilder().AddInMemoryCollection(values).Build().GetSection("ReverseProxy"), errors);

        Assert.Empty(errors);
        Assert.Equal(new SessionAffinityConfig
        {
            Enabled = true, Policy = "ArrCookie", FailurePolicy = "Return503Error", AffinityKeyName = "k",
            Cookie = new SessionAffinityCookieConfig
            {
                Domain = "example.com", Expiration = TimeSpan.FromHours(1), HttpOnly = false, IsEssential = true, MaxAge = TimeSpan.FromMinutes(30),
                Path = "/app", SameSite = SameSiteMode.Strict, SecurePolicy = CookieSecurePolicy.Always,
            },
        }, Assert.Single(config.Clusters).SessionAffinity);
    }

    [Theory]
    [InlineData("Policy", "Sticky", "ReverseProxy:Clusters:c1:SessionAffinity:Policy: 'Sticky' is not a known policy")]
    [InlineData("FailurePolicy", "Retry", "ReverseProxy:Clusters:c1:SessionAffinity:FailurePolicy: 'Retry' is not a known policy")]
    [InlineData("AffinityKeyName", "", "ReverseProxy:Clusters:c1:SessionAffinity:AffinityKeyName: is required")]
    [InlineData("Cookie:SameSite", "Loose", "ReverseProxy:Clusters:c1:SessionAffinity:Cookie:SameSite: 'Loose' is not one of")]
    public void Validate_BadAffinityValue_ErrorNamesKey(string key, string value, string expected)
    {
        var values = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:1/")
            .Set("Clusters:c1:SessionAffinity:Enabled", "true")
            .Set("Clusters:c1:SessionAffinity:AffinityKeyName", "k")
            .Set("Clusters:c1:SessionAffinity:" + key, value);
        var errors = values.ReadAndValidate();

        Assert.Contains(errors, e => e.StartsWith(expected, StringComparison.Ordinal));
    }
}
