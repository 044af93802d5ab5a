using System.Net;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using KestrelListenOptions = Microsoft.AspNetCore.Server.Kestrel.Core.ListenOptions;
using KestrelProtocols = Microsoft.AspNetCore.Server.Kestrel.Core.HttpProtocols;
using ProxyProtocols = Proxy.Server.HttpProtocols;

namespace Proxy.Load.Server;

/// <summary>What `serve` hosts and where.</summary>
public sealed record ServeOptions
{
    /// <summary><c>proxy</c> (our server) or <c>kestrel</c>.</summary>
    public string Server { get; init; } = "proxy";

    public string Host { get; init; } = "127.0.0.1";

    /// <summary>Cleartext port: HTTP/1.1 (+ h2c on our server). 0 = any free port.</summary>
    public int HttpPort { get; init; } = 5201;

    /// <summary>Extra cleartext port for h2c (Kestrel: HTTP/2 only), or null.</summary>
    public int? H2cPort { get; init; }

    /// <summary>TLS port (ALPN h2 + http/1.1), or null.</summary>
    public int? HttpsPort { get; init; }

    public int SseRate { get; init; } = 10;
}

/// <summary>
/// The benchmark backend running: the same endpoints on our server or on Kestrel, and the addresses it bound.
/// </summary>
// Owned by whoever started it (the serve command or a test); dispose to stop.
public sealed class BenchmarkServer : IAsyncDisposable
{
    private readonly WebApplication _app;
    private readonly BenchmarkEndpoints _endpoints;

    private BenchmarkServer(WebApplication app, BenchmarkEndpoints endpoints, Uri http, Uri? h2c, Uri? https)
    {
        _app = app;
        _endpoints = endpoints;
        HttpAddress = http;
        H2cAddress = h2c;
        HttpsAddress = https;
    }

    public Uri HttpAddress { get; }

    /// <summary>
    /// Where h2c prior knowledge works: our server, the h2c port or else the http port; Kestrel, the h2c port or
    /// null without one.
    /// </summary>
    public Uri? H2cAddress { get; }

    public Uri? HttpsAddress { get; }

    public static async Task<BenchmarkServer> StartAsync(ServeOptions options, bool logWarnings = true)
    {
        var builder = WebApplication.CreateBuilder(new WebApplicationOptions { ApplicationName = typeof(BenchmarkServer).Assembly.GetName().Name });
        builder.Logging.ClearProviders();
        if (logWarnings)
        {
            builder.Logging.AddSimpleConsole();
        }

        builder.Logging.AddFilter((_, level) => level >= LogLevel.Warning);
        var address = IPAddress.Parse(options.Host);
        X509Certificate2? certificate = options.HttpsPort is null ? null : SelfSignedCertificate.Create();

        Func<IServer, (Uri Http, Uri? H2c, Uri? Https)> resolve = options.Server switch
        {
            "proxy" => UseProxyServer(builder, options, address, certificate),
            "kestrel" => UseKestrel(builder, options, address, certificate),
            _ => throw new ArgumentException($"Unknown --server '{options.Server}' (proxy or kestrel)."),
        };

        BenchmarkEndpoints.AddServices(builder.Services);
        var app = builder.Build();
        var endpoints = new BenchmarkEndpoints(options.SseRate);
        endpoints.Map(app);
        await app.StartAsync();
        var (http, h2c, https) = resolve(app.Services.GetRequiredService<IServer>());
        return new BenchmarkServer(app, endpoints, http, h2c, https);
    }

    private static Func<IServer, (Uri, Uri?, Uri?)> UseProxyServer(
        WebApplicationBuilder builder, ServeOptions options, IPAddress address, X509Certificate2? certificate)
    {
        builder.WebHost.UseProxyServer(server =>
        {
            server.AddServerHeader = false;
            // As on Kestrel below: a TLS-terminating proxy in front forwards :scheme https over h2c.
            server.AllowAlternateSchemes = true;
            server.Listen(address, options.HttpPort, listen => listen.Protocols = ProxyProtocols.Http1AndHttp2);
            if (options.H2cPort is { } h2c)
            {
                server.Listen(address, h2c, listen => listen.Protocols = ProxyProtocols.Http1AndHttp2);
            }

            if (options.HttpsPort is { } tls)
            {
                server.Listen(address, tls, listen =>
                {
                    listen.Protocols = ProxyProtocols.Http1AndHttp2;
                    listen.UseHttps(certificate);
                });
            }
        });

        // Bound ports come back through IServerAddressesFeature, in listen order.
        return server =>
        {
            var addresses = server.Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Select(a => new Uri(a)).ToList();
            var cleartext = addresses.Where(u => u.Scheme == Uri.UriSchemeHttp).ToList();
            var http = cleartext[0];
            var h2c = options.H2cPort is null ? http : cleartext[1];
            return (http, h2c, addresses.FirstOrDefault(u => u.Scheme == Uri.UriSchemeHttps));
        };
    }

    private static Func<IServer, (Uri, Uri?, Uri?)> UseKestrel(
        WebApplicationBuilder builder, ServeOptions options, IPAddress address, X509Certificate2? certificate)
    {
        KestrelListenOptions? http = null, h2c = null, tls = null;
        builder.WebHost.UseKestrel(kestrel =>
        {
            kestrel.AddServerHeader = false;
            // Behind a TLS-terminating proxy the forwarded :scheme is https on a cleartext h2c connection
            // (HAProxy and nghttpx pass the client's scheme through). Kestrel resets such streams with
            // PROTOCOL_ERROR unless told otherwise (our server too).
            kestrel.AllowAlternateSchemes = true;
            kestrel.Listen(address, options.HttpPort, listen => { listen.Protocols = KestrelProtocols.Http1; http = listen; });
            if (options.H2cPort is { } h2cPort)
            {
                // Kestrel speaks h2c (prior knowledge) only on an HTTP/2-only endpoint.
                kestrel.Listen(address, h2cPort, listen => { listen.Protocols = KestrelProtocols.Http2; h2c = listen; });
            }

            if (options.HttpsPort is { } tlsPort)
            {
                kestrel.Listen(address, tlsPort, listen =>
                {
                    listen.Protocols = KestrelProtocols.Http1AndHttp2;
                    listen.UseHttps(certificate!);
                    tls = listen;
                });
            }
        });

        // Kestrel writes the bound port back into each ListenOptions when it binds port 0.
        return _ =>
        {
            return (Address("http", http!), h2c is null ? null : Address("http", h2c), tls is null ? null : Address("https", tls));
        };

        Uri Address(string scheme, KestrelListenOptions listen) => new($"{scheme}://{options.Host}:{listen.IPEndPoint!.Port}");
    }

    /// <summary>Completes on SIGINT/SIGTERM (the host's console lifetime).</summary>
    public Task WaitForShutdownAsync() => _app.WaitForShutdownAsync();

    public async ValueTask DisposeAsync()
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(5));
        try
        {
            await _app.StopAsync(timeout.Token);
        }
        finally
        {
            await _app.DisposeAsync();
            await _endpoints.DisposeAsync();
        }
    }
}
