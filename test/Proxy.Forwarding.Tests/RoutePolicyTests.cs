using System.Net;
using Microsoft.AspNetCore.Authorization;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Cors.Infrastructure;
using Microsoft.AspNetCore.Http.Timeouts;
using Microsoft.AspNetCore.OutputCaching;
using Microsoft.AspNetCore.RateLimiting;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// Route policies (YARP's AuthorizationPolicy, CorsPolicy, RateLimiterPolicy, OutputCachePolicy, TimeoutPolicy, Timeout,
/// MaxRequestBodySize) applied by ASP.NET Core's own middleware over real sockets, and names the app never registered
/// refused at startup and on reload.
/// </summary>
public sealed class RoutePolicyTests : IDisposable
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(30);
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-policies-").FullName;

    public void Dispose() => Directory.Delete(_directory, recursive: true);

    private static ProxyConfigDictionary Routes(TestApp backend, params (string Id, string Key, string Value)[] routes)
    {
        var config = new ProxyConfigDictionary().Destination("c1", "d1", backend.Url);
        foreach (var (id, key, value) in routes)
        {
            config.Route(id, "c1", $"/{id}/{{**rest}}").Set($"Routes:{id}:{key}", value);
        }

        return config;
    }

    private static HttpRequestMessage Get(string path, string? user = null, string? role = null)
    {
        var request = new HttpRequestMessage(HttpMethod.Get, path);
        if (user is not null)
        {
            request.Headers.Add("x-user", user);
        }

        if (role is not null)
        {
            request.Headers.Add("x-role", role);
        }

        return request;
    }

    [Fact]
    public async Task AuthorizationPolicy_Named_401Without403WrongRole200WithRole()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("admin", "AuthorizationPolicy", PolicyApps.Admins)));
        using var http = proxy.CreateClient();

        using var anonymous = await http.SendAsync(Get("/admin/x")).WaitAsync(Guard);
        using var wrongRole = await http.SendAsync(Get("/admin/x", user: "bob")).WaitAsync(Guard);
        using var admin = await http.SendAsync(Get("/admin/x", user: "ann", role: "admin")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.Unauthorized, anonymous.StatusCode);
        Assert.Equal(HttpStatusCode.Forbidden, wrongRole.StatusCode);
        Assert.Equal(HttpStatusCode.OK, admin.StatusCode);
        Assert.Equal("request 1, body 0 bytes", await admin.Content.ReadAsStringAsync()); // the refused ones never reached it
    }

    [Fact]
    public async Task AuthorizationPolicy_DefaultAndAnonymous_UnderFallbackPolicy()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend,
            ("default", "AuthorizationPolicy", "Default"), ("open", "AuthorizationPolicy", "anonymous"), ("plain", "Order", "0")),
            fallbackRequiresUser: true);
        using var http = proxy.CreateClient();

        using var defaultAnonymous = await http.SendAsync(Get("/default/x")).WaitAsync(Guard);
        using var defaultUser = await http.SendAsync(Get("/default/x", user: "bob")).WaitAsync(Guard);
        using var open = await http.SendAsync(Get("/open/x")).WaitAsync(Guard);
        using var plain = await http.SendAsync(Get("/plain/x")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.Unauthorized, defaultAnonymous.StatusCode);
        Assert.Equal(HttpStatusCode.OK, defaultUser.StatusCode);
        Assert.Equal(HttpStatusCode.OK, open.StatusCode);
        Assert.Equal(HttpStatusCode.Unauthorized, plain.StatusCode); // no policy of its own: the app's fallback applies
    }

    [Fact]
    public async Task CorsPolicy_Preflight_AnsweredPerPolicy_EvenWithMethodMatch()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        var config = Routes(backend, ("named", "CorsPolicy", PolicyApps.Partners), ("default", "CorsPolicy", "default"), ("off", "CorsPolicy", "disable"))
            .Set("Routes:named:Match:Methods:0", "PUT");
        await using var proxy = await PolicyApps.StartAsync(config);
        using var http = proxy.CreateClient();

        using var named = await http.SendAsync(Preflight("/named/x", PolicyApps.PartnerOrigin, "PUT")).WaitAsync(Guard);
        using var stranger = await http.SendAsync(Preflight("/named/x", "https://evil.example", "PUT")).WaitAsync(Guard);
        using var byDefault = await http.SendAsync(Preflight("/default/x", PolicyApps.DefaultOrigin, "GET")).WaitAsync(Guard);
        using var off = await http.SendAsync(Preflight("/off/x", PolicyApps.PartnerOrigin, "GET")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.NoContent, named.StatusCode);
        Assert.Equal(PolicyApps.PartnerOrigin, named.Headers.GetValues("Access-Control-Allow-Origin").Single());
        Assert.Contains("PUT", named.Headers.GetValues("Access-Control-Allow-Methods").Single());
        Assert.False(stranger.Headers.Contains("Access-Control-Allow-Origin"));
        Assert.Equal(PolicyApps.DefaultOrigin, byDefault.Headers.GetValues("Access-Control-Allow-Origin").Single());
        Assert.False(off.Headers.Contains("Access-Control-Allow-Origin"));
    }

    private static HttpRequestMessage Preflight(string path, string origin, string method)
    {
        var request = new HttpRequestMessage(HttpMethod.Options, path);
        request.Headers.Add("Origin", origin);
        request.Headers.Add("Access-Control-Request-Method", method);
        return request;
    }

    [Fact]
    public async Task RateLimiterPolicy_Named_SecondRequest429_DisabledRouteUnlimited()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("limited", "RateLimiterPolicy", PolicyApps.OnePerHour),
            ("free", "RateLimiterPolicy", "disable")));
        using var http = proxy.CreateClient();

        using var first = await http.SendAsync(Get("/limited/x")).WaitAsync(Guard);
        using var second = await http.SendAsync(Get("/limited/x")).WaitAsync(Guard);
        using var free1 = await http.SendAsync(Get("/free/x")).WaitAsync(Guard);
        using var free2 = await http.SendAsync(Get("/free/x")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.OK, first.StatusCode);
        Assert.Equal(HttpStatusCode.TooManyRequests, second.StatusCode);
        Assert.Equal((HttpStatusCode.OK, HttpStatusCode.OK), (free1.StatusCode, free2.StatusCode));
    }

    [Fact]
    public async Task OutputCachePolicy_Named_SecondRequestServedFromCache()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("cached", "OutputCachePolicy", PolicyApps.Cached)));
        using var http = proxy.CreateClient();

        var first = await http.GetStringAsync("/cached/x").WaitAsync(Guard);
        var second = await http.GetStringAsync("/cached/x").WaitAsync(Guard);

        Assert.Equal("request 1, body 0 bytes", first);
        Assert.Equal(first, second);
    }

    [Fact]
    public async Task TimeoutPolicy_Named_MiddlewareAnswers504WithPolicyBody()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("slow", "TimeoutPolicy", PolicyApps.Short)));
        using var http = proxy.CreateClient();

        using var routed = await http.SendAsync(Get("/slow/hang")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.GatewayTimeout, routed.StatusCode);
        Assert.Equal(PolicyApps.TimeoutBody, await routed.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task Timeout_UnderRequestTimeoutsMiddleware_504()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("slow", "Timeout", "00:00:00.2")));
        using var http = proxy.CreateClient();

        using var routed = await http.SendAsync(Get("/slow/hang")).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.GatewayTimeout, routed.StatusCode);
    }

    [Fact]
    public async Task PolicyKeys_BecomeAspNetCoreEndpointMetadata()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend,
            ("auth", "AuthorizationPolicy", PolicyApps.Admins), ("anon", "AuthorizationPolicy", "Anonymous"),
            ("cors", "CorsPolicy", "default"), ("nocors", "CorsPolicy", "disable"),
            ("limit", "RateLimiterPolicy", PolicyApps.OnePerHour), ("global", "RateLimiterPolicy", "default"), ("nolimit", "RateLimiterPolicy", "disable"),
            ("cache", "OutputCachePolicy", PolicyApps.Cached),
            ("timeout", "TimeoutPolicy", PolicyApps.Short), ("notimeout", "TimeoutPolicy", "disable"), ("deadline", "Timeout", "00:00:01.5")));
        var endpoints = ((IEndpointRouteBuilder)proxy.App).DataSources.SelectMany(d => d.Endpoints).ToDictionary(e => e.DisplayName!);
        T Single<T>(string route) where T : class => Assert.Single(endpoints[route].Metadata.OfType<T>());

        Assert.Equal(PolicyApps.Admins, Single<IAuthorizeData>("auth").Policy);
        Single<IAllowAnonymous>("anon");
        Assert.Null(Single<IEnableCorsAttribute>("cors").PolicyName);
        Single<IDisableCorsAttribute>("nocors");
        Assert.Equal(PolicyApps.OnePerHour, Single<EnableRateLimitingAttribute>("limit").PolicyName);
        Assert.Empty(endpoints["global"].Metadata.OfType<EnableRateLimitingAttribute>()); // the global limiter needs no metadata
        Single<DisableRateLimitingAttribute>("nolimit");
        Assert.Equal(PolicyApps.Cached, Single<OutputCacheAttribute>("cache").PolicyName);
        Assert.Equal(PolicyApps.Short, Single<RequestTimeoutAttribute>("timeout").PolicyName);
        Single<DisableRequestTimeoutAttribute>("notimeout");
        Assert.Equal(TimeSpan.FromMilliseconds(1500), Single<RequestTimeoutAttribute>("deadline").Timeout);
    }

    [Theory]
    [InlineData(100, HttpStatusCode.RequestEntityTooLarge)]
    [InlineData(10, HttpStatusCode.OK)]
    public async Task MaxRequestBodySize_Route_LongerBody413(int length, HttpStatusCode expected)
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("small", "MaxRequestBodySize", "10")));
        using var http = proxy.CreateClient();

        using var response = await http.PostAsync("/small/x", new ByteArrayContent(new byte[length])).WaitAsync(Guard);

        Assert.Equal(expected, response.StatusCode);
        if (expected == HttpStatusCode.OK)
        {
            Assert.Equal("request 1, body 10 bytes", await response.Content.ReadAsStringAsync());
        }
    }

    [Fact]
    public async Task MaxRequestBodySize_Route_LongerChunkedBody413()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("small", "MaxRequestBodySize", "10")));
        using var http = proxy.CreateClient();
        // No length declared: the limit is met while the body streams.
        using var body = new StreamContent(new MemoryStream(new byte[100]));

        using var response = await http.PostAsync("/small/x", body).WaitAsync(Guard);

        Assert.Equal(HttpStatusCode.RequestEntityTooLarge, response.StatusCode);
    }

    [Theory]
    [InlineData("AuthorizationPolicy", "authorization")]
    [InlineData("CorsPolicy", "CORS")]
    [InlineData("RateLimiterPolicy", "rate limiter")]
    [InlineData("OutputCachePolicy", "output cache")]
    [InlineData("TimeoutPolicy", "request timeout")]
    public async Task UnregisteredPolicyName_StartupFails_NamingKeyFileAndName(string key, string kind)
    {
        var path = Path.Combine(_directory, "proxy.json");
        await File.WriteAllTextAsync(path, $$"""
            { "ReverseProxy": {
                "Routes": { "r1": { "ClusterId": "c1", "Match": { "Path": "/{**all}" }, "{{key}}": "nope" } },
                "Clusters": { "c1": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);

        var error = await Assert.ThrowsAsync<ProxyConfigException>(() => ProxyTestHost.StartProxyAsync(b =>
        {
            b.Configuration.AddJsonFile(path);
            PolicyApps.AddPolicies(b.Services);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding()));

        var message = Assert.Single(error.Errors);
        Assert.StartsWith($"ReverseProxy:Routes:r1:{key}: 'nope' is not a registered {kind} policy", message);
        Assert.EndsWith($"(in {path})", message);
    }

    [Theory]
    [InlineData("AuthorizationPolicy", "default", "'default' needs the app's authorization services: call services.AddAuthorization(...)")]
    [InlineData("CorsPolicy", "disable", "'disable' needs the app's CORS services and middleware: call services.AddCors(...) and app.UseCors()")]
    public async Task PolicyKey_AppWithoutItsServices_StartupFailsSayingWhatToAdd(string key, string value, string expected)
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:1/")
            .Set("Routes:r1:" + key, value);

        var error = await Assert.ThrowsAsync<ProxyConfigException>(() => Proxies.StartConfiguredAsync(config));

        Assert.Contains($"ReverseProxy:Routes:r1:{key}: {expected}", error.Message);
    }

    [Fact]
    public async Task Reload_UnregisteredPolicyName_RefusedLastGoodKept()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        await using var proxy = await PolicyApps.StartAsync(Routes(backend, ("admin", "AuthorizationPolicy", PolicyApps.Admins)));
        using var http = proxy.CreateClient();
        var manager = proxy.Services.GetRequiredService<ProxyStateManager>();
        var attempt = manager.NextReloadAttempt;

        proxy.App.Configuration["ReverseProxy:Routes:admin:AuthorizationPolicy"] = "nope";
        ((IConfigurationRoot)proxy.App.Configuration).Reload();
        await attempt.WaitAsync(Guard);
        using var anonymous = await http.SendAsync(Get("/admin/x")).WaitAsync(Guard);

        Assert.Contains("ReverseProxy:Routes:admin:AuthorizationPolicy: 'nope' is not a registered authorization policy", manager.LastReloadError);
        Assert.Equal(HttpStatusCode.Unauthorized, anonymous.StatusCode); // still the last good policy
    }

    [Theory]
    [InlineData("Routes:r1:TimeoutPolicy", "ReverseProxy:Routes:r1:TimeoutPolicy: cannot be combined with Timeout")]
    [InlineData("Routes:r1:MaxRequestBodySize", "ReverseProxy:Routes:r1:MaxRequestBodySize: must be a number of bytes, or -1 for no limit.")]
    public void Validate_PolicyKeyMisused_ErrorNamesKey(string key, string expected)
    {
        var values = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:1/")
            .Set("Routes:r1:Timeout", "00:00:05").Set(key, key.EndsWith("Size", StringComparison.Ordinal) ? "-2" : "short");
        var errors = values.ReadAndValidate();

        Assert.Contains(errors, e => e.StartsWith(expected, StringComparison.Ordinal));
    }
}
