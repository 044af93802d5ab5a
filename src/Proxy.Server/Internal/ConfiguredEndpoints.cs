using System.Net.Security;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Logging;
using Proxy.Transport.Certificates;
using Proxy.Transport.Tls;

namespace Proxy.Server.Internal;

/// <summary>
/// What the <c>ProxyServer</c> configuration section says about endpoints and certificates, with Kestrel's keys:
/// <c>Certificates:Default</c> (for https endpoints without their own) and <c>Endpoints:{name}</c> with <c>Url</c>,
/// <c>Protocols</c>, <c>Certificate</c> and <c>Sni:{host}:Certificate</c>. Certificates come from files (<c>Path</c>,
/// <c>KeyPath</c>, <c>Password</c>) and follow them when they change. Every error names the key (and the file).
/// </summary>
// Built once by ProxyServer.StartAsync; owns the file watchers until the server stops.
internal sealed class ConfiguredEndpoints : IDisposable
{
    private static readonly string[] CertificateKeys = ["Path", "KeyPath", "Password"];
    private static readonly string[] EndpointKeys = ["Url", "Protocols", "Certificate", "Sni", "SslProtocols", "ClientCertificateMode"];

    // One watcher per folder for all the configured certificates (see CertificateFileWatcher's NOTE).
    private readonly CertificateFileWatcher _watcher = new();

    private ConfiguredEndpoints()
    {
    }

    /// <summary><c>Certificates:Default</c>, when configured.</summary>
    public ReloadingCertificate? DefaultCertificate { get; private set; }

    /// <summary>The <c>Endpoints</c> entries, in configuration order.</summary>
    public List<ListenOptions> Endpoints { get; } = [];

    public static ConfiguredEndpoints Load(IConfiguration? section, string sectionPath, string contentRoot, ILoggerFactory loggers, ILogger serverLogger)
    {
        var result = new ConfiguredEndpoints();
        if (section is null)
        {
            return result;
        }

        var logger = loggers.CreateLogger<ReloadingCertificate>();
        try
        {
            var certificates = section.GetSection("Certificates");
            foreach (var child in certificates.GetChildren().Where(c => c.Key != "Default"))
            {
                throw new InvalidOperationException($"{sectionPath}:Certificates:{child.Key}: only Certificates:Default is read (per-endpoint certificates go under Endpoints:{{name}}:Certificate).");
            }

            if (ReadFiles(certificates.GetSection("Default"), $"{sectionPath}:Certificates:Default", contentRoot) is { } defaults)
            {
                result.DefaultCertificate = new ReloadingCertificate(defaults, logger, result._watcher);
            }

            foreach (var endpoint in section.GetSection("Endpoints").GetChildren())
            {
                result.Endpoints.Add(result.ReadEndpoint(endpoint, $"{sectionPath}:Endpoints:{endpoint.Key}", contentRoot, logger, serverLogger));
            }

            return result;
        }
        catch
        {
            result.Dispose();
            throw;
        }
    }

    private ListenOptions ReadEndpoint(IConfigurationSection s, string path, string contentRoot, ILogger certificateLogger, ILogger serverLogger)
    {
        RejectUnknown(s, path, EndpointKeys);
        var url = s["Url"] ?? throw new InvalidOperationException($"{path}:Url: required (e.g. https://0.0.0.0:8443).");
        var endpoint = EndpointResolver.Parse(url, serverLogger, $"{path}:Url");
        if (s["Protocols"] is { } protocols)
        {
            endpoint.Protocols = protocols.Trim().ToLowerInvariant() switch
            {
                "http1" => HttpProtocols.Http1,
                "http2" => HttpProtocols.Http2,
                "http1andhttp2" => HttpProtocols.Http1AndHttp2,
                _ => throw new InvalidOperationException($"{path}:Protocols: '{protocols}' is not one of Http1, Http2, Http1AndHttp2."),
            };
        }

        var own = ReadFiles(s.GetSection("Certificate"), $"{path}:Certificate", contentRoot) is { } files
            ? new ReloadingCertificate(files, certificateLogger, _watcher)
            : null;
        var sni = new List<KeyValuePair<string, Func<SslStreamCertificateContext>>>();
        foreach (var host in s.GetSection("Sni").GetChildren())
        {
            var hostPath = $"{path}:Sni:{host.Key}";
            RejectUnknown(host, hostPath, ["Certificate"]);
            var certificate = ReadFiles(host.GetSection("Certificate"), $"{hostPath}:Certificate", contentRoot)
                ?? throw new InvalidOperationException($"{hostPath}:Certificate: required (Path, and KeyPath for a PEM certificate).");
            var reloading = new ReloadingCertificate(certificate, certificateLogger, _watcher);
            sni.Add(new(host.Key, () => reloading.Context));
        }

        var tlsOnly = own is not null || sni.Count > 0 || s["SslProtocols"] is not null || s.GetSection("SslProtocols").GetChildren().Any()
            || s["ClientCertificateMode"] is not null;
        if (tlsOnly && !endpoint.IsTls)
        {
            throw new InvalidOperationException($"{path}: TLS settings are configured but Url '{url}' is not https://.");
        }

        if (ReadSslProtocols(s.GetSection("SslProtocols")) is { } sslProtocols)
        {
            endpoint.Tls!.EnabledSslProtocols = sslProtocols;
        }

        if (s["ClientCertificateMode"] is { } mode)
        {
            endpoint.Tls!.ClientCertificateMode = Enum.TryParse<ClientCertificateMode>(mode, ignoreCase: true, out var parsed) && Enum.IsDefined(parsed) && !char.IsDigit(mode[0])
                ? parsed
                : throw new InvalidOperationException($"{path}:ClientCertificateMode: '{mode}' is not one of NoCertificate, AllowCertificate, RequireCertificate.");
        }

        if (sni.Count > 0)
        {
            // A name that matches no entry: the endpoint's certificate, else Certificates:Default, else the handshake is refused.
            var fallback = own ?? DefaultCertificate;
            var map = new SniCertificateMap(sni, fallback is null ? null : () => fallback.Context);
            endpoint.Tls!.ServerCertificateSelector = map.Select;
        }
        else if (own is not null)
        {
            endpoint.Tls!.ServerCertificateSelector = _ => own.Context;
        }

        return endpoint;
    }

    /// <summary>Kestrel's form, a list (<c>[ "Tls12", "Tls13" ]</c>), or one string with commas; null when absent.</summary>
    private static System.Security.Authentication.SslProtocols? ReadSslProtocols(IConfigurationSection s)
    {
        var names = s.Value is { } single ? single.Split(',', StringSplitOptions.TrimEntries | StringSplitOptions.RemoveEmptyEntries)
            : s.GetChildren().Select(c => c.Value ?? "").ToArray();
        if (names.Length == 0)
        {
            return null;
        }

        var result = System.Security.Authentication.SslProtocols.None;
        foreach (var name in names)
        {
            // RFC 9113 §9.2: HTTP/2 over TLS needs TLS 1.2 or higher; older versions are not offered at all.
            result |= name.ToLowerInvariant() switch
            {
                "tls12" => System.Security.Authentication.SslProtocols.Tls12,
                "tls13" => System.Security.Authentication.SslProtocols.Tls13,
                "none" => System.Security.Authentication.SslProtocols.None,
                _ => throw new InvalidOperationException($"{s.Path}: '{name}' is not one of Tls12, Tls13 (or None for the platform default)."),
            };
        }

        return result;
    }

    /// <summary>A certificate section's files, or null when the section is absent. Relative paths start at the content root.</summary>
    private static CertificateFileOptions? ReadFiles(IConfigurationSection s, string path, string contentRoot)
    {
        if (!s.Exists())
        {
            return null;
        }

        RejectUnknown(s, path, CertificateKeys);
        var file = s["Path"] ?? throw new InvalidOperationException($"{path}:Path: required (a .pfx file, or a PEM certificate with KeyPath).");
        return new CertificateFileOptions(path, Path.Combine(contentRoot, file), s["KeyPath"] is { } key ? Path.Combine(contentRoot, key) : null, s["Password"]);
    }

    // Kestrel's other certificate sources (Subject/Store/Location/AllowInvalid) and endpoint options (SslProtocols,
    // ClientCertificateMode) are not read: a key we would ignore is an error instead.
    private static void RejectUnknown(IConfigurationSection s, string path, string[] known)
    {
        foreach (var child in s.GetChildren())
        {
            if (!known.Contains(child.Key, StringComparer.OrdinalIgnoreCase))
            {
                throw new InvalidOperationException($"{path}:{child.Key}: not supported here (known keys: {string.Join(", ", known)}).");
            }
        }
    }

    public void Dispose() => _watcher.Dispose();
}
