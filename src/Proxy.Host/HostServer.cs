using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Proxy.Server;
using Proxy.Transport.Certificates;

namespace Proxy.Host;

/// <summary>The HTTP server the proxy runs on (<c>Host:Server</c>).</summary>
public enum ProxyHostServer
{
    /// <summary>Our server (<c>UseProxyServer</c>), options from the <c>ProxyServer</c> section. The default.</summary>
    Proxy,

    /// <summary>ASP.NET Core's Kestrel, options from the <c>Kestrel</c> section: the setting a YARP user is in.</summary>
    Kestrel,
}

/// <summary>Reads <c>Host:Server</c> and puts the proxy on that server.</summary>
internal static class HostServer
{
    /// <summary>The configuration key: <c>proxy</c> (default) or <c>kestrel</c>, any case.</summary>
    public const string Key = "Host:Server";

    /// <summary>Kestrel's own configuration section (endpoints, certificates, limits).</summary>
    public const string KestrelSection = "Kestrel";

    /// <summary>Parses <see cref="Key"/>; throws <see cref="HostStartupException"/> naming it for any other value.</summary>
    public static ProxyHostServer Read(IConfiguration configuration) => configuration[Key]?.Trim().ToLowerInvariant() switch
    {
        null or "" or "proxy" => ProxyHostServer.Proxy,
        "kestrel" => ProxyHostServer.Kestrel,
        var other => throw new HostStartupException($"{Key} is '{other}': use 'proxy' (our server, the default) or 'kestrel'."),
    };

    /// <summary>True when Kestrel takes its endpoints from <c>Kestrel:Endpoints</c>, which replace the URLs.</summary>
    public static bool HasKestrelEndpoints(IConfiguration configuration)
        => configuration.GetSection($"{KestrelSection}:Endpoints").Exists();

    /// <summary>True when the chosen server takes its endpoints from configuration (<c>Kestrel:Endpoints</c> or <c>ProxyServer:Endpoints</c>).</summary>
    public static bool HasConfiguredEndpoints(IConfiguration configuration, ProxyHostServer server) => server == ProxyHostServer.Kestrel
        ? HasKestrelEndpoints(configuration)
        : configuration.GetSection($"{ProxyServerWebHostBuilderExtensions.ConfigurationSectionName}:Endpoints").Exists();

    /// <summary>
    /// <c>ProxyServer:Sockets:EpollThreads</c> must be a whole number from 0 to 1024: checked at startup with the key named,
    /// on every platform, engine and server. On our server with the runtime's engine the startup log line says the value
    /// does not apply; on Kestrel the whole <c>ProxyServer</c> section does not (README, "Host: which server").
    /// </summary>
    public static void ValidateEpollThreads(IConfiguration configuration, string configFile)
    {
        var key = $"{ProxyServerWebHostBuilderExtensions.ConfigurationSectionName}:Sockets:EpollThreads";
        var text = configuration[key];
        if (string.IsNullOrEmpty(text))
        {
            return;
        }

        if (!int.TryParse(text, System.Globalization.NumberStyles.Integer, System.Globalization.CultureInfo.InvariantCulture, out var threads)
            || threads is < 0 or > Proxy.Transport.Sockets.SocketTransportOptions.MaxEpollThreads)
        {
            throw new HostStartupException($"{key} is '{text}' (in {configFile} or the command line): use 0 (one thread per core) or a number of threads up to {Proxy.Transport.Sockets.SocketTransportOptions.MaxEpollThreads}.");
        }
    }

    public static void Use(WebApplicationBuilder builder, ProxyHostServer server)
    {
        if (server == ProxyHostServer.Proxy)
        {
            // Our epoll engine by default on Linux, the front and backend sockets alike (measured in
            // benchmarks/README.md, session 13). Registered before UseProxyServer binds the section, so
            // ProxyServer:Sockets:Engine=Runtime in any configuration source still wins.
            if (OperatingSystem.IsLinux())
            {
                builder.Services.Configure<ProxyServerOptions>(o => o.Sockets.Engine = Proxy.Transport.Sockets.SocketEngine.Epoll);
            }
            builder.WebHost.UseProxyServer();
            return;
        }

        // WebApplication.CreateBuilder registered Kestrel already, reading Kestrel:Endpoints, Kestrel:Certificates and
        // Kestrel:EndpointDefaults. The rest of the section (AddServerHeader, Limits, ...) is bound here, as
        // UseProxyServer binds ProxyServer.
        builder.Services.Configure<KestrelServerOptions>(builder.Configuration.GetSection(KestrelSection));

        // https endpoints without a certificate of their own get the one our server would use: the development
        // certificate (ProxyServer:DevelopmentCertificateDirectory), unless Kestrel:Certificates:Default names one.
        if (!builder.Configuration.GetSection($"{KestrelSection}:Certificates:Default").Exists())
        {
            var directory = builder.Configuration[$"{ProxyServerWebHostBuilderExtensions.ConfigurationSectionName}:{nameof(ProxyServerOptions.DevelopmentCertificateDirectory)}"];
            var certificate = new Lazy<X509Certificate2>(() => DevelopmentCertificate.GetOrCreate(directory));
            builder.WebHost.ConfigureKestrel(kestrel => kestrel.ConfigureHttpsDefaults(https => https.ServerCertificate = certificate.Value));
        }
    }
}
