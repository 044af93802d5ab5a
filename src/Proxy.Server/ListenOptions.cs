using System.Net.Security;
using System.Security.Cryptography.X509Certificates;
using Proxy.Transport.Tls;

namespace Proxy.Server;

/// <summary>One endpoint the server listens on: address, protocols, optional TLS.</summary>
public sealed class ListenOptions
{
    public ListenOptions(IPEndPoint endPoint)
    {
        ArgumentNullException.ThrowIfNull(endPoint);
        EndPoint = endPoint;
    }

    /// <summary>The endpoint to bind; port 0 asks the OS for a free port.</summary>
    public IPEndPoint EndPoint { get; }

    public HttpProtocols Protocols { get; set; } = HttpProtocols.Http1AndHttp2;

    /// <summary>TLS settings when <see cref="UseHttps"/> was called, else null (cleartext).</summary>
    public TlsServerOptions? Tls { get; private set; }

    public bool IsTls => Tls is not null;

    internal string Scheme => IsTls ? "https" : "http";

    /// <summary>Set by the server when this endpoint came from a URL with "localhost" (for the reported address).</summary>
    internal string? DisplayHost { get; set; }

    /// <summary>
    /// Serves this endpoint over TLS. Without a certificate, the server's
    /// <see cref="ProxyServerOptions.ServerCertificate"/> is used, else the development certificate.
    /// </summary>
    public ListenOptions UseHttps(X509Certificate2? certificate = null, Action<TlsServerOptions>? configure = null)
    {
        Tls ??= new TlsServerOptions();
        if (certificate is not null)
        {
            Tls.ServerCertificate = certificate;
        }
        configure?.Invoke(Tls);
        return this;
    }

    /// <summary>ALPN list for <see cref="Protocols"/>, most preferred first.</summary>
    internal List<SslApplicationProtocol> AlpnProtocols()
    {
        var list = new List<SslApplicationProtocol>(2);
        if ((Protocols & HttpProtocols.Http2) != 0)
        {
            list.Add(SslApplicationProtocol.Http2);
        }
        if ((Protocols & HttpProtocols.Http1) != 0)
        {
            list.Add(SslApplicationProtocol.Http11);
        }
        return list;
    }

    public override string ToString() => $"{Scheme}://{FormatHost(EndPoint.Address)}:{EndPoint.Port}";

    internal static string FormatHost(IPAddress address)
        => address.AddressFamily == System.Net.Sockets.AddressFamily.InterNetworkV6 ? $"[{address}]" : address.ToString();
}
