using System.Security.Cryptography.X509Certificates;
using Microsoft.Extensions.Configuration;
using Proxy.Protocols.Http1;
using Proxy.Protocols.Http2;
using Proxy.Transport.Buffers;
using Proxy.Transport.Sockets;

namespace Proxy.Server;

/// <summary>Options of <see cref="ProxyServer"/> (configure with UseProxyServer or IOptions).</summary>
public sealed class ProxyServerOptions
{
    /// <summary>Endpoints configured in code. When empty, the server binds the host's URLs (--urls / ASPNETCORE_URLS).</summary>
    public List<ListenOptions> ListenOptions { get; } = [];

    public Http1Options Http1 { get; set; } = new();

    /// <summary>HTTP/2 settings; the default instance's stream pipes use <see cref="BlockMemoryPool.StreamDefault"/>.</summary>
    public Http2Options Http2 { get; set; } = new() { StreamMemoryPool = BlockMemoryPool.StreamDefault, StreamMinimumSegmentSize = BlockMemoryPool.StreamTinyBlockSize };

    public SocketTransportOptions Sockets { get; set; } = new();

    /// <summary>Native memory held per TLS connection and by the C heap (section <c>ProxyServer:Memory</c>).</summary>
    public ServerMemoryOptions Memory { get; set; } = new();

    /// <summary>
    /// Kestrel's name for <see cref="Http2Options.AllowAlternateSchemes"/> (the same setting: reads and writes
    /// <see cref="Http2"/>'s): accept an HTTP/2 ":scheme" other than the connection's when it is a valid scheme.
    /// </summary>
    public bool AllowAlternateSchemes
    {
        get => Http2.AllowAlternateSchemes;
        set => Http2.AllowAlternateSchemes = value;
    }

    /// <summary>
    /// Default certificate for https endpoints without their own. Wins over <c>Certificates:Default</c> from configuration
    /// (code runs after configuration, as with Kestrel's ConfigureHttpsDefaults).
    /// </summary>
    public X509Certificate2? ServerCertificate { get; set; }

    /// <summary>
    /// The section <c>Endpoints</c> and <c>Certificates</c> are read from, with Kestrel's keys (see the README);
    /// <c>UseProxyServer</c> sets it to the <c>ProxyServer</c> section. Read once, when the server starts; the certificate
    /// files it names are watched and reloaded when they change.
    /// </summary>
    public IConfiguration? Configuration { get; set; }

    /// <summary>Where relative certificate paths start (the host's content root; the current directory when unset).</summary>
    public string? ContentRootPath { get; set; }

    /// <summary>Where the development certificate is kept (defaults to $HOME/.proxy).</summary>
    public string? DevelopmentCertificateDirectory { get; set; }

    /// <summary>Adds "server: proxy" to responses that do not set one.</summary>
    public bool AddServerHeader { get; set; } = true;

    /// <summary>Default request body limit per request (413 beyond it); null means unlimited. Kestrel's default: ~28.6 MiB.</summary>
    public long? MaxRequestBodySize { get; set; } = 30_000_000;

    /// <summary>Time a cleartext connection has to send its first bytes before the protocol is chosen (slowloris).</summary>
    public TimeSpan ProtocolDetectionTimeout { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>
    /// Connections open at once over all endpoints; at the bound the accept loops wait and new clients wait in the listen
    /// backlog. Null (the default): on Linux, the open-file limit less the descriptors open at start and a reserve of an
    /// eighth of the limit (at least 256) for backend connections and the runtime (which holds every assembly it loads
    /// open, and aborts when it cannot get a descriptor for a new thread); elsewhere no bound. 0: no bound. Kestrel's
    /// <c>Limits:MaxConcurrentConnections</c>.
    /// </summary>
    public long? MaxConcurrentConnections { get; set; }

    public ProxyServerOptions Listen(IPAddress address, int port, Action<ListenOptions>? configure = null)
        => Listen(new IPEndPoint(address, port), configure);

    public ProxyServerOptions Listen(IPEndPoint endPoint, Action<ListenOptions>? configure = null)
    {
        var listen = new ListenOptions(endPoint);
        configure?.Invoke(listen);
        ListenOptions.Add(listen);
        return this;
    }

    /// <summary>Listens on 127.0.0.1 and, when the OS has IPv6, on ::1.</summary>
    public ProxyServerOptions ListenLocalhost(int port, Action<ListenOptions>? configure = null)
    {
        var listen = new ListenOptions(new IPEndPoint(IPAddress.Loopback, port)) { DisplayHost = "localhost" };
        configure?.Invoke(listen);
        ListenOptions.Add(listen);
        return this;
    }

    /// <summary>Listens on every interface ([::] dual-mode, or 0.0.0.0 without IPv6).</summary>
    public ProxyServerOptions ListenAnyIP(int port, Action<ListenOptions>? configure = null)
        => Listen(System.Net.Sockets.Socket.OSSupportsIPv6 ? IPAddress.IPv6Any : IPAddress.Any, port, configure);
}

/// <summary>Native memory the server gives back (section <c>ProxyServer:Memory</c>).</summary>
public sealed class ServerMemoryOptions
{
    /// <summary>
    /// Lets OpenSSL free a TLS connection's record buffers (about 34 KB) while they are empty: 3.4 KB per stream at 10
    /// streams per connection. Applies to endpoints whose <see cref="Proxy.Transport.Tls.TlsServerOptions.ReleaseIdleBuffers"/>
    /// is left on; Linux only.
    /// </summary>
    public bool ReleaseIdleTlsBuffers { get; set; } = true;

    /// <summary>
    /// How often the C heap's free pages go back to the operating system (glibc's <c>malloc_trim</c>; see
    /// <see cref="NativeHeapTrimmer"/>) while the server runs; <see cref="TimeSpan.Zero"/> turns it off.
    /// </summary>
    public TimeSpan NativeHeapTrimInterval { get; set; } = TimeSpan.FromSeconds(10);
}
