using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>No key under ReverseProxy is ignored in silence: unknown keys and YARP keys we lack stop the load, ignored ones warn.</summary>
public sealed class ConfigKeyTests : IDisposable
{
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-config-keys-").FullName;

    public void Dispose() => Directory.Delete(_directory, recursive: true);

    private static (List<string> Errors, List<string> Warnings) Read(ProxyConfigDictionary values)
    {
        var errors = new List<string>();
        var warnings = new List<string>();
        ConfigurationReader.Read(new ConfigurationBuilder().AddInMemoryCollection(values).Build().GetSection("ReverseProxy"), errors, warnings);
        return (errors, warnings);
    }

    private static ProxyConfigDictionary Valid() =>
        new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:5000/");

    [Theory]
    [InlineData("Routes:r1:Foo", "ReverseProxy:Routes:r1:Foo: is not a known route key (known: ClusterId, Order,")]
    [InlineData("Routes:r1:AuthorisationPolicy", "ReverseProxy:Routes:r1:AuthorisationPolicy: is not a known route key")]
    [InlineData("Routes:r1:Match:Paht", "ReverseProxy:Routes:r1:Match:Paht: is not a known route match key")]
    [InlineData("Routes:r1:Match:Headers:0:Nmae", "ReverseProxy:Routes:r1:Match:Headers:0:Nmae: is not a known header or query matcher key")]
    [InlineData("Clusters:c1:LoadBalancing", "ReverseProxy:Clusters:c1:LoadBalancing: is not a known cluster key")]
    [InlineData("Clusters:c1:Destinations:d1:Adress", "ReverseProxy:Clusters:c1:Destinations:d1:Adress: is not a known destination key")]
    [InlineData("Clusters:c1:HttpClient:MaxConnections", "ReverseProxy:Clusters:c1:HttpClient:MaxConnections: is not a known HttpClient key")]
    [InlineData("Clusters:c1:HttpRequest:Timeout", "ReverseProxy:Clusters:c1:HttpRequest:Timeout: is not a known HttpRequest key")]
    [InlineData("Clusters:c1:HealthCheck:Active:Intervall", "ReverseProxy:Clusters:c1:HealthCheck:Active:Intervall: is not a known active health check key")]
    [InlineData("Clusters:c1:HealthCheck:Passive:Period", "ReverseProxy:Clusters:c1:HealthCheck:Passive:Period: is not a known passive health check key")]
    [InlineData("Clusters:c1:SessionAffinity:KeyName", "ReverseProxy:Clusters:c1:SessionAffinity:KeyName: is not a known SessionAffinity key")]
    [InlineData("Clusters:c1:SessionAffinity:Cookie:Secure", "ReverseProxy:Clusters:c1:SessionAffinity:Cookie:Secure: is not a known affinity cookie key")]
    [InlineData("Route:r1:ClusterId", "ReverseProxy:Route: is not a known ReverseProxy key (known: Routes, Clusters).")]
    public void UnknownKey_ErrorNamesFullPath(string key, string expected)
    {
        var (errors, _) = Read(Valid().Set(key, "x"));

        Assert.StartsWith(expected, Assert.Single(errors));
    }

    [Theory]
    [InlineData("Clusters:c1:Extensions:Mine", "ReverseProxy:Clusters:c1:Extensions: is not supported")]
    [InlineData("Routes:r1:RouteId", "ReverseProxy:Routes:r1:RouteId: is not supported: the route's id is its key")]
    public void KnownYarpKeyNotImplemented_ErrorSaysNotSupported(string key, string expected)
    {
        var (errors, _) = Read(Valid().Set(key, "x"));

        Assert.StartsWith(expected, Assert.Single(errors));
    }

    [Theory]
    [InlineData("Clusters:c1:HttpClient:SslProtocols:0", "Tls13")]
    [InlineData("Clusters:c1:HttpClient:SslProtocols", "Tls12, Tls13")]
    [InlineData("Clusters:c1:HttpClient:RequestHeaderEncoding", "utf-8")]
    [InlineData("Clusters:c1:HttpClient:ResponseHeaderEncoding", "utf-8")]
    [InlineData("Clusters:c1:HttpClient:WebProxy:Address", "http://proxy.local:3128")]
    [InlineData("Clusters:c1:HttpClient:WebProxy:BypassOnLocal", "true")]
    [InlineData("Clusters:c1:HttpClient:WebProxy:UseDefaultCredentials", "false")]
    [InlineData("Clusters:c1:HttpRequest:AllowResponseBuffering", "true")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "virtual.example")]
    [InlineData("Clusters:c1:HealthCheck:Active:Query", "?ready=1")]
    public void YarpKeysImplementedSince_Accepted(string key, string value)
    {
        var values = Valid().Set(key, value);
        if (key.Contains(":WebProxy:", StringComparison.Ordinal) && !key.EndsWith(":Address", StringComparison.Ordinal))
        {
            values.Set("Clusters:c1:HttpClient:WebProxy:Address", "http://proxy.local:3128");
        }

        var (errors, _) = Read(values);

        Assert.Empty(errors);
    }

    [Theory]
    [InlineData("Routes:r1:Timeout:Seconds", "5", "ReverseProxy:Routes:r1:Timeout: must be a single value, not a section.")]
    [InlineData("Routes:r1:Metadata:owner:name", "x", "ReverseProxy:Routes:r1:Metadata:owner: route metadata values are strings, not sections.")]
    [InlineData("Routes:r1:Transforms:0:PathPrefix:x", "/a", "ReverseProxy:Routes:r1:Transforms:0:PathPrefix: transform values are strings, not sections.")]
    [InlineData("Clusters:c1:HealthCheck", "on", "ReverseProxy:Clusters:c1:HealthCheck: must be a section (HealthCheck), not the value 'on'.")]
    public void WrongShape_ErrorNamesKey(string key, string value, string expected)
    {
        var (errors, _) = Read(Valid().Set(key, value));

        Assert.Contains(expected, errors);
    }

    [Fact]
    public void ClusterIdInsideCluster_WarningNotError()
    {
        var (errors, warnings) = Read(Valid().Set("Clusters:c1:ClusterId", "c1"));

        Assert.Empty(errors);
        Assert.StartsWith("ReverseProxy:Clusters:c1:ClusterId: is ignored", Assert.Single(warnings));
    }

    [Fact]
    public void EveryKeyWeRead_Accepted()
    {
        var values = Valid();
        foreach (var key in new[]
        {
            "Routes:r1:Order", "Routes:r1:Timeout", "Routes:r1:ActivityTimeout", "Routes:r1:AuthorizationPolicy", "Routes:r1:CorsPolicy",
            "Routes:r1:RateLimiterPolicy", "Routes:r1:OutputCachePolicy", "Routes:r1:TimeoutPolicy", "Routes:r1:MaxRequestBodySize",
            "Routes:r1:Metadata:a", "Routes:r1:Transforms:0:PathPrefix", "Routes:r1:Match:PathPrefix", "Routes:r1:Match:Hosts:0",
            "Routes:r1:Match:Methods:0", "Routes:r1:Match:Headers:0:Name", "Routes:r1:Match:Headers:0:Values:0", "Routes:r1:Match:Headers:0:Mode",
            "Routes:r1:Match:Headers:0:IsCaseSensitive", "Routes:r1:Match:QueryParameters:0:Name", "Clusters:c1:LoadBalancingPolicy",
            "Clusters:c1:Transport", "Clusters:c1:Metadata:a", "Clusters:c1:Destinations:d1:Health", "Clusters:c1:Destinations:d1:Metadata:a",
            "Clusters:c1:HttpClient:MaxConnectionsPerServer", "Clusters:c1:HttpClient:EnableMultipleHttp2Connections",
            "Clusters:c1:HttpClient:PooledConnectionLifetime", "Clusters:c1:HttpClient:PooledConnectionIdleTimeout",
            "Clusters:c1:HttpClient:ConnectTimeout", "Clusters:c1:HttpClient:DangerousAcceptAnyServerCertificate",
            "Clusters:c1:HttpClient:KeepAlivePingDelay", "Clusters:c1:HttpClient:KeepAlivePingTimeout",
            "Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination", "Clusters:c1:HttpClient:QueueTimeout", "Clusters:c1:HttpClient:MaxQueueLength",
            "Clusters:c1:HttpRequest:ActivityTimeout", "Clusters:c1:HttpRequest:Version", "Clusters:c1:HttpRequest:VersionPolicy",
            "Clusters:c1:HealthCheck:AvailableDestinationsPolicy", "Clusters:c1:HealthCheck:Active:Enabled", "Clusters:c1:HealthCheck:Active:Interval",
            "Clusters:c1:HealthCheck:Active:Timeout", "Clusters:c1:HealthCheck:Active:Policy", "Clusters:c1:HealthCheck:Active:Path",
            "Clusters:c1:HealthCheck:Passive:Enabled", "Clusters:c1:HealthCheck:Passive:Policy", "Clusters:c1:HealthCheck:Passive:ReactivationPeriod",
            "Clusters:c1:SessionAffinity:Enabled", "Clusters:c1:SessionAffinity:Policy", "Clusters:c1:SessionAffinity:FailurePolicy",
            "Clusters:c1:SessionAffinity:AffinityKeyName", "Clusters:c1:SessionAffinity:Cookie:Domain", "Clusters:c1:SessionAffinity:Cookie:Expiration",
            "Clusters:c1:SessionAffinity:Cookie:HttpOnly", "Clusters:c1:SessionAffinity:Cookie:IsEssential", "Clusters:c1:SessionAffinity:Cookie:MaxAge",
            "Clusters:c1:SessionAffinity:Cookie:Path", "Clusters:c1:SessionAffinity:Cookie:SameSite", "Clusters:c1:SessionAffinity:Cookie:SecurePolicy",
        })
        {
            values.Set(key, "1");
        }

        // Only the values are wrong here ("1" is not a TimeSpan...), never a key.
        Assert.DoesNotContain(Read(values).Errors, e => e.Contains("is not a known", StringComparison.Ordinal) || e.Contains("not supported", StringComparison.Ordinal));
    }

    [Fact]
    public async Task MisspeltKeyInJsonFile_StartupFails_NamingKeyAndFile()
    {
        var path = Path.Combine(_directory, "proxy.json");
        await File.WriteAllTextAsync(path, """
            { "ReverseProxy": {
                "Routes": { "r1": { "ClusterId": "c1", "Match": { "Path": "/{**all}" }, "AuthorisationPolicy": "admins" } },
                "Clusters": { "c1": { "ClusterId": "c1", "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);
        var logs = new CapturingLoggerProvider();

        var error = await Assert.ThrowsAsync<ProxyConfigException>(() => ProxyTestHost.StartProxyAsync(b =>
        {
            b.Logging.AddProvider(logs);
            b.Configuration.AddJsonFile(path);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding()));

        Assert.StartsWith("ReverseProxy:Routes:r1:AuthorisationPolicy: is not a known route key", Assert.Single(error.Errors));
        Assert.EndsWith($"(in {path})", error.Errors[0]);
        var warning = Assert.Single(logs.Warnings);
        Assert.Contains($"ReverseProxy:Clusters:c1:ClusterId: is ignored: the cluster's id is its key under Clusters (YARP ignores it too). (in {path})", warning.Message);
    }
}
