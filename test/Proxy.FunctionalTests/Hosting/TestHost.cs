using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// One app under test on a real socket: the same endpoints on Kestrel or on our server, bound to
/// 127.0.0.1:0 with a cleartext endpoint (HTTP/1.1 and h2c prior knowledge) and, when asked, a TLS
/// endpoint (ALPN h2 and http/1.1).
/// </summary>
// Owned by the test class (or its fixture) that started it.
public sealed class TestHost : IAsyncDisposable
{
    private TestHost(ServerKind kind, WebApplication app, Uri httpAddress, Uri h2cAddress, Uri? httpsAddress)
    {
        Kind = kind;
        App = app;
        HttpAddress = httpAddress;
        H2cAddress = h2cAddress;
        HttpsAddress = httpsAddress;
    }

    public ServerKind Kind { get; }

    public WebApplication App { get; }

    /// <summary>Cleartext HTTP/1.1 base address, e.g. http://127.0.0.1:41234/.</summary>
    public Uri HttpAddress { get; }

    /// <summary>
    /// Cleartext HTTP/2 (prior knowledge) base address. Our server serves HTTP/1.1 and h2c on one port
    /// (it tells them apart by the connection preface), so this equals <see cref="HttpAddress"/>; Kestrel
    /// only does h2c on an HTTP/2-only endpoint, so there it is a second port.
    /// </summary>
    public Uri H2cAddress { get; }

    /// <summary>TLS base address (ALPN h2, http/1.1), or null when started without TLS.</summary>
    public Uri? HttpsAddress { get; }

    /// <summary>The base address a client of <paramref name="transport"/> uses.</summary>
    public Uri AddressFor(HttpTransport transport) => transport switch
    {
        HttpTransport.Http2Cleartext => H2cAddress,
        HttpTransport.Http11Cleartext => HttpAddress,
        _ => HttpsAddress ?? throw new InvalidOperationException("This host was started without TLS."),
    };

    public static async Task<TestHost> StartAsync(
        ServerKind kind,
        Action<WebApplication> mapEndpoints,
        bool https = true,
        Action<IServiceCollection>? configureServices = null,
        Action<WebApplicationBuilder>? configureBuilder = null)
    {
        var builder = WebApplication.CreateBuilder(new WebApplicationOptions
        {
            EnvironmentName = "Testing",
            ApplicationName = typeof(TestHost).Assembly.GetName().Name,
        });
        builder.Logging.ClearProviders();
        builder.Logging.AddFilter((_, level) => level >= LogLevel.Warning);
        configureServices?.Invoke(builder.Services);
        configureBuilder?.Invoke(builder);

        Func<IServer, Addresses> resolveAddresses = kind switch
        {
            ServerKind.Kestrel => UseKestrel(builder, https),
            ServerKind.ProxyServer => UseProxyServer(builder, https),
            _ => throw new ArgumentOutOfRangeException(nameof(kind), kind, null),
        };

        var app = builder.Build();
        mapEndpoints(app);
        await app.StartAsync();

        Addresses bound;
        try
        {
            bound = resolveAddresses(app.Services.GetRequiredService<IServer>());
            if (bound.Http.Port == 0 || bound.H2c.Port == 0 || (https && bound.Https is not { Port: > 0 }))
            {
                throw new InvalidOperationException($"{kind} reported unbound addresses: {bound}");
            }
        }
        catch
        {
            await app.DisposeAsync();
            throw;
        }

        return new TestHost(kind, app, bound.Http, bound.H2c, bound.Https);
    }

    internal sealed record Addresses(Uri Http, Uri H2c, Uri? Https);

    /// <summary>
    /// Kestrel: HTTP/1.1 on one port, h2c prior knowledge on an HTTP/2-only port (Kestrel refuses h2c on
    /// Http1AndHttp2 without TLS), and TLS with ALPN h2 + http/1.1.
    /// </summary>
    private static Func<IServer, Addresses> UseKestrel(WebApplicationBuilder builder, bool https)
    {
        ListenOptions? http = null, h2c = null, tls = null;
        builder.WebHost.UseKestrel(options =>
        {
            options.Listen(IPAddress.Loopback, 0, listen => { listen.Protocols = HttpProtocols.Http1; http = listen; });
            options.Listen(IPAddress.Loopback, 0, listen => { listen.Protocols = HttpProtocols.Http2; h2c = listen; });
            if (https)
            {
                options.Listen(IPAddress.Loopback, 0, listen =>
                {
                    listen.Protocols = HttpProtocols.Http1AndHttp2;
                    listen.UseHttps(TestCertificate.Certificate);
                    tls = listen;
                });
            }
        });

        // Kestrel writes the bound port back into each ListenOptions when it binds port 0.
        return _ => new Addresses(
            BaseAddress("http", http!),
            BaseAddress("http", h2c!),
            tls is null ? null : BaseAddress("https", tls));

        static Uri BaseAddress(string scheme, ListenOptions listen) => new($"{scheme}://127.0.0.1:{listen.IPEndPoint!.Port}/");
    }

    /// <summary>
    /// Our server: one cleartext port for HTTP/1.1 and h2c prior knowledge (told apart by the preface) and,
    /// when <paramref name="https"/>, a TLS port with ALPN h2 + http/1.1. The bound ports come from
    /// IServerAddressesFeature.
    /// </summary>
    private static Func<IServer, Addresses> UseProxyServer(WebApplicationBuilder builder, bool https)
    {
        // As in the standalone proxy: on our server, forwarded requests take the native relay (Kestrel keeps HttpClient).
        Proxy.Relay.NativeRelayExtensions.AddNativeRelay(builder.Services);
        builder.WebHost.UseProxyServer(options =>
        {
            options.Listen(IPAddress.Loopback, 0, listen => listen.Protocols = Proxy.Server.HttpProtocols.Http1AndHttp2);
            if (https)
            {
                options.Listen(IPAddress.Loopback, 0, listen =>
                {
                    listen.Protocols = Proxy.Server.HttpProtocols.Http1AndHttp2;
                    listen.UseHttps(TestCertificate.Certificate);
                });
            }
        });
        return FromAddressesFeature;
    }

    /// <summary>Addresses of a server that serves HTTP/1.1 and h2c on one cleartext port.</summary>
    internal static Addresses FromAddressesFeature(IServer server)
    {
        var addresses = server.Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Select(a => new Uri(a)).ToList();
        var http = addresses.SingleOrDefault(u => u.Scheme == Uri.UriSchemeHttp)
            ?? throw new InvalidOperationException($"No http address among: {string.Join(", ", addresses)}");
        var tls = addresses.SingleOrDefault(u => u.Scheme == Uri.UriSchemeHttps);
        return new Addresses(http, http, tls);
    }

    public async ValueTask DisposeAsync()
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(5));
        try
        {
            await App.StopAsync(timeout.Token);
        }
        finally
        {
            await App.DisposeAsync();
        }
    }
}
