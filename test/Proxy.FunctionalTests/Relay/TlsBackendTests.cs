using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// TLS to backends on the native relay: SNI and ALPN (h2 preferred, http/1.1 when the cluster asks for 1.1), the
/// backend's self-signed certificate refused by default (502) and accepted with DangerousAcceptAnyServerCertificate.
/// </summary>
public sealed class TlsBackendTests : IAsyncLifetime
{
    private TestHost? _backend;
    private TestHost? _proxy;
    private readonly ForwardingOutcomes _outcomes = new();

    public async Task InitializeAsync()
    {
        _backend = await TestHost.StartAsync(ServerKind.Kestrel, app => app.Run(async ctx =>
        {
            await ctx.Response.WriteAsync($"{ctx.Request.Protocol} {ctx.Request.IsHttps} {ctx.Request.Host.Host}");
        }), https: true);
        var tls = _backend.HttpsAddress!.ToString();
        var keys = new ReverseProxyKeys()
            .NativeRoute("h2", "h2", tls, h2c: false)
            .ClusterSet("h2", "HttpClient:DangerousAcceptAnyServerCertificate", "true")
            .NativeRoute("h1", "h1", tls, h2c: false)
            .ClusterSet("h1", "HttpClient:DangerousAcceptAnyServerCertificate", "true")
            .ClusterSet("h1", "HttpRequest:Version", "1.1")
            .NativeRoute("strict", "strict", tls, h2c: false);
        _proxy = await RelayProxy.StartAsync(keys, _outcomes);
    }

    [Fact]
    public async Task TlsBackend_AlpnH2_Relayed()
    {
        using var client = RelayProxy.CreateClient(_proxy!);
        Assert.Equal("HTTP/2 True 127.0.0.1", await client.GetStringAsync("/h2/x"));
    }

    [Fact]
    public async Task TlsBackend_Version11_AlpnHttp11()
    {
        using var client = RelayProxy.CreateClient(_proxy!);
        Assert.Equal("HTTP/1.1 True 127.0.0.1", await client.GetStringAsync("/h1/x"));
    }

    [Fact]
    public async Task TlsBackend_UntrustedCertificate_502AndNothingSent()
    {
        using var client = RelayProxy.CreateClient(_proxy!);
        using var response = await client.GetAsync("/strict/x");
        Assert.Equal(System.Net.HttpStatusCode.BadGateway, response.StatusCode);
        var (error, exception) = await _outcomes.ForAsync("/strict/x");
        Assert.Equal(ForwarderError.Request, error);
        Assert.Contains("certificate", exception?.ToString() ?? "", StringComparison.OrdinalIgnoreCase);
    }

    public async Task DisposeAsync()
    {
        if (_proxy is not null)
        {
            await _proxy.DisposeAsync();
        }

        if (_backend is not null)
        {
            await _backend.DisposeAsync();
        }
    }
}
