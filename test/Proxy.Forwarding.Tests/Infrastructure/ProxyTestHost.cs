using System.Net;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>What a test server's single loopback listener speaks (h2 = h2c with prior knowledge).</summary>
public enum TestProtocol
{
    Http1,
    Http2,
}

/// <summary>A started app on 127.0.0.1 with a random port.</summary>
public sealed class TestApp(WebApplication app, Uri baseAddress, TestProtocol protocol) : IAsyncDisposable
{
    public WebApplication App { get; } = app;

    public Uri BaseAddress { get; } = baseAddress;

    public string Url => BaseAddress.ToString();

    public IServiceProvider Services => App.Services;

    /// <summary>An HttpClient speaking the listener's protocol (HTTP/2 with prior knowledge for h2c).</summary>
    public HttpClient CreateClient(TimeSpan? timeout = null) => new(new SocketsHttpHandler { UseCookies = false, AllowAutoRedirect = false, UseProxy = false })
    {
        BaseAddress = BaseAddress,
        DefaultRequestVersion = protocol == TestProtocol.Http2 ? HttpVersion.Version20 : HttpVersion.Version11,
        DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
        Timeout = timeout ?? TimeSpan.FromSeconds(20),
    };

    public async ValueTask DisposeAsync()
    {
        await App.StopAsync(TimeSpan.FromSeconds(2)).ConfigureAwait(false);
        await App.DisposeAsync().ConfigureAwait(false);
    }
}

/// <summary>
/// The one place that decides which server hosts the proxy under test: Kestrel in
/// Proxy.Forwarding.Tests, Proxy.Server in Proxy.Forwarding.OnProxyServer.Tests (same sources,
/// compiled with PROXY_SERVER), Proxy.Server with the native relay in Proxy.Forwarding.OnNativeRelay.Tests
/// (PROXY_SERVER and NATIVE_RELAY).
/// </summary>
public static class ProxyTestHost
{
    /// <summary>Starts a proxy app: configure services/config, then map endpoints (usually MapProxyForwarding).</summary>
    public static Task<TestApp> StartProxyAsync(Action<WebApplicationBuilder> configure, Action<WebApplication> map, TestProtocol protocol = TestProtocol.Http1) =>
        StartAsync(configure, map, protocol, UseServer);

    /// <summary>
    /// Starts a proxy app on TLS (h2 and http/1.1 by ALPN) with <paramref name="certificate"/>, asking clients for a
    /// certificate and accepting any they present (for transforms that read it).
    /// </summary>
    public static Task<TestApp> StartTlsProxyAsync(Action<WebApplicationBuilder> configure, Action<WebApplication> map, X509Certificate2 certificate) =>
        StartAsync(configure, map, TestProtocol.Http2, (builder, _) => UseServerOnTls(builder, certificate));

    /// <summary>
    /// The test puts its own middleware in front of the proxy and needs it to see every request: in the direct-path suite
    /// that turns the direct path off (as a user with such middleware would leave it off); elsewhere it changes nothing.
    /// </summary>
    public static void NeedsPipeline(IServiceCollection services)
    {
#if DIRECT_PATH
        Microsoft.Extensions.DependencyInjection.Extensions.ServiceCollectionDescriptorExtensions.RemoveAll<Proxy.Server.IDirectRequestHandler>(services);
#endif
    }

    /// <summary>Starts a backend. Backends always run on Kestrel: they are the fixed reference peer.</summary>
    public static Task<TestApp> StartBackendAsync(Action<WebApplication> map, TestProtocol protocol = TestProtocol.Http1) =>
        StartAsync(_ => { }, map, protocol, UseKestrel);

#if PROXY_SERVER
    private static void UseServerOnTls(WebApplicationBuilder builder, X509Certificate2 certificate)
    {
        builder.WebHost.UseProxyServer(o =>
        {
            UseHostEngine(o);
            o.Listen(IPAddress.Loopback, 0, l => l.UseHttps(certificate, tls =>
            {
                tls.ClientCertificateMode = Proxy.Transport.Tls.ClientCertificateMode.AllowCertificate;
                tls.ClientCertificateValidation = (_, _, _) => true;
            }));
        });
#if DIRECT_PATH
        Proxy.Relay.NativeRelayExtensions.AddDirectPath(builder.Services);
#elif NATIVE_RELAY
        Proxy.Relay.NativeRelayExtensions.AddNativeRelay(builder.Services);
#endif
    }

    private static void UseServer(WebApplicationBuilder builder, TestProtocol protocol)
    {
        builder.WebHost.UseProxyServer(o =>
        {
            UseHostEngine(o);
            o.MaxRequestBodySize = null;
            o.Listen(IPAddress.Loopback, 0, l => l.Protocols = protocol == TestProtocol.Http2 ? Proxy.Server.HttpProtocols.Http2 : Proxy.Server.HttpProtocols.Http1);
        });
#if DIRECT_PATH
        Proxy.Relay.NativeRelayExtensions.AddDirectPath(builder.Services);
#elif NATIVE_RELAY
        // On Proxy.Server the native relay is every cluster's default transport.
        Proxy.Relay.NativeRelayExtensions.AddNativeRelay(builder.Services);
#endif
    }

    // The relay suite runs on the standalone proxy's socket engine (ours, epoll, on Linux: front and backend sockets);
    // the suite on Proxy.Server with HttpClient keeps the runtime's, so both engines carry a whole suite.
    private static void UseHostEngine(Proxy.Server.ProxyServerOptions options)
    {
#if NATIVE_RELAY
        if (OperatingSystem.IsLinux())
        {
            options.Sockets.Engine = Proxy.Transport.Sockets.SocketEngine.Epoll;
        }
#endif
    }
#else
    private static void UseServer(WebApplicationBuilder builder, TestProtocol protocol) => UseKestrel(builder, protocol);

    private static void UseServerOnTls(WebApplicationBuilder builder, X509Certificate2 certificate) =>
        builder.WebHost.UseKestrel(o => o.Listen(IPAddress.Loopback, 0, l => l.UseHttps(new Microsoft.AspNetCore.Server.Kestrel.Https.HttpsConnectionAdapterOptions
        {
            ServerCertificate = certificate,
            ClientCertificateMode = Microsoft.AspNetCore.Server.Kestrel.Https.ClientCertificateMode.AllowCertificate,
            ClientCertificateValidation = (_, _, _) => true,
        })));
#endif

    private static void UseKestrel(WebApplicationBuilder builder, TestProtocol protocol) =>
        builder.WebHost.UseKestrel(o =>
        {
            o.Limits.MaxRequestBodySize = null;
            o.Listen(IPAddress.Loopback, 0, l => l.Protocols = protocol == TestProtocol.Http2 ? HttpProtocols.Http2 : HttpProtocols.Http1);
        });

    private static async Task<TestApp> StartAsync(Action<WebApplicationBuilder> configure, Action<WebApplication> map, TestProtocol protocol,
        Action<WebApplicationBuilder, TestProtocol> useServer)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        useServer(builder, protocol);
        configure(builder);
        var app = builder.Build();
        map(app);
        await app.StartAsync().ConfigureAwait(false);
        var address = app.Services.GetRequiredService<Microsoft.AspNetCore.Hosting.Server.IServer>()
            .Features.Get<IServerAddressesFeature>()!.Addresses.First();
        return new TestApp(app, new Uri(address.Replace("[::]", "127.0.0.1", StringComparison.Ordinal) + "/"), protocol);
    }
}
