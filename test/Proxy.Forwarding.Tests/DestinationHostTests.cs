using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>A destination's <c>Host</c> key and the active probe's <c>Query</c>.</summary>
public class DestinationHostTests
{
    [Theory]
    [InlineData(TestProtocol.Http1)]
    [InlineData(TestProtocol.Http2)]
    public async Task DestinationHost_BackendSeesConfiguredHost(TestProtocol backendProtocol)
    {
        await using var backend = await Backends.StartEchoAsync(backendProtocol);
        await using var proxy = await Proxies.StartForAsync(backend, h2cBackend: backendProtocol == TestProtocol.Http2,
            extra: c => c.Set("Clusters:c1:Destinations:d1:Host", "virtual.example:8443"));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");
        var echo = await response.ReadEchoAsync();

        // HTTP/1.1: the Host field; HTTP/2: :authority, which Kestrel shows as Host.
        Assert.Equal("virtual.example:8443", echo.Headers["host"]);
        Assert.Equal(backendProtocol == TestProtocol.Http2 ? "HTTP/2" : "HTTP/1.1", echo.Protocol);
    }

    [Fact]
    public async Task DestinationHost_TlsDestination_IsTheSniName()
    {
        string? sni = null;
        await using var backend = await Backends.StartTlsAsync(context => context.Response.WriteAsync(context.Request.Host.Value!),
            name => sni = name);
        await using var proxy = await Proxies.StartForAsync(backend, extra: c => c
            .Set("Clusters:c1:Destinations:d1:Host", "virtual.example:8443")
            .Set("Clusters:c1:HttpClient:DangerousAcceptAnyServerCertificate", "true"));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        // SocketsHttpHandler takes SNI from the Host header; the native relay does the same with the destination's Host.
        Assert.Equal("virtual.example:8443", await response.Content.ReadAsStringAsync());
        Assert.Equal("virtual.example", sni);
    }

    [Fact]
    public async Task DestinationHost_TransformsStillWin()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend, extra: c => c
            .Set("Clusters:c1:Destinations:d1:Host", "virtual.example")
            .Set("Routes:r1:Transforms:0:RequestHeaderOriginalHost", "true"));
        using var http = proxy.CreateClient();
        var message = new HttpRequestMessage(HttpMethod.Get, "/");
        message.Headers.Host = "public.example";

        using var response = await http.SendAsync(message);
        var echo = await response.ReadEchoAsync();

        Assert.Equal("public.example", echo.Headers["host"]);
    }

    [Fact]
    public async Task ActiveProbe_QueryAndDestinationHost_SentWithTheProbe()
    {
        var probes = new List<string>();
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.MapGet("/health", (HttpContext context) =>
        {
            lock (probes)
            {
                probes.Add($"{context.Request.Path}{context.Request.QueryString} {context.Request.Host}");
            }

            return "ok";
        }));
        await using var proxy = await Proxies.StartForAsync(backend, extra: c => c
            .Set("Clusters:c1:Destinations:d1:Host", "virtual.example")
            .Set("Clusters:c1:HealthCheck:Active:Enabled", "true")
            .Set("Clusters:c1:HealthCheck:Active:Interval", "01:00:00")
            .Set("Clusters:c1:HealthCheck:Active:Path", "/health")
            .Set("Clusters:c1:HealthCheck:Active:Query", "?ready=1&from=proxy"));
        var checker = proxy.Services.GetServices<IHostedService>().OfType<ActiveHealthChecker>().Single();
        var cluster = proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"];

        await checker.ProbeClusterAsync(cluster, CancellationToken.None);

        lock (probes)
        {
            Assert.Contains("/health?ready=1&from=proxy virtual.example", probes);
        }

        Assert.Equal(Proxy.Forwarding.BackendPools.DestinationHealth.Healthy, cluster.Destinations.Single().Health);
    }

    private static List<string> Validate(string key, string value) => ConfigCheck.Valid().Set(key, value).ReadAndValidate();

    [Theory]
    [InlineData("Clusters:c1:Destinations:d1:Host", "example.com")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "example.com:8080")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "[::1]:8080")]
    [InlineData("Clusters:c1:HealthCheck:Active:Query", "?a=1&b=2")]
    [InlineData("Clusters:c1:HealthCheck:Active:Query", "")]
    public void Validate_GoodHostOrQuery_NoErrors(string key, string value)
    {
        Assert.Empty(Validate(key, value));
    }

    [Theory]
    [InlineData("Clusters:c1:Destinations:d1:Host", "http://example.com", "ReverseProxy:Clusters:c1:Destinations:d1:Host: 'http://example.com' is not a host name")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "user@example.com", "ReverseProxy:Clusters:c1:Destinations:d1:Host: 'user@example.com' is not a host name")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "example.com/x", "ReverseProxy:Clusters:c1:Destinations:d1:Host: 'example.com/x' is not a host name")]
    [InlineData("Clusters:c1:Destinations:d1:Host", "example.com:99999", "ReverseProxy:Clusters:c1:Destinations:d1:Host: 'example.com:99999' is not a host name")]
    [InlineData("Clusters:c1:HealthCheck:Active:Query", "ready=1", "ReverseProxy:Clusters:c1:HealthCheck:Active:Query: 'ready=1' must start with '?'")]
    [InlineData("Clusters:c1:HealthCheck:Active:Query", "?a=1#frag", "ReverseProxy:Clusters:c1:HealthCheck:Active:Query: '?a=1#frag' must start with '?'")]
    public void Validate_BadHostOrQuery_ErrorNamesTheKey(string key, string value, string expected)
    {
        Assert.Contains(Validate(key, value), e => e.StartsWith(expected, StringComparison.Ordinal));
    }
}
