using System.Net;
using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.Protocols;

/// <summary>What the engine knows about its connection; set by the host at accept time, read-only after.</summary>
public sealed class ConnectionMetadata
{
    public required string ConnectionId { get; init; }
    public EndPoint? LocalEndPoint { get; init; }
    public EndPoint? RemoteEndPoint { get; init; }

    /// <summary>The remote IP address as text (X-Forwarded-For's value), formatted once per connection; null when the remote end is not an IP endpoint.</summary>
    // NOTE: racing first readers may each format it; they store equal strings.
    public string? RemoteIpText => _remoteIpText ??= (RemoteEndPoint as IPEndPoint)?.Address.ToString();
    private string? _remoteIpText;

    /// <summary>"https" when TLS wraps the connection, else "http".</summary>
    public string Scheme => IsTls ? "https" : "http";
    public bool IsTls { get; init; }
    public SslProtocols TlsProtocol { get; init; }
    public TlsCipherSuite? NegotiatedCipherSuite { get; init; }
    /// <summary>The ALPN protocol ("h2", "http/1.1") or empty when none was negotiated.</summary>
    public string ApplicationProtocol { get; init; } = "";
    public X509Certificate2? ClientCertificate { get; init; }
    public string? HostName { get; init; }

    /// <summary>Where the engine runs its writer loop when a producer wakes it, and the handler of a stream whose handler may run on the event loop (the thread pool by default).</summary>
    public WorkScheduler Scheduler { get; init; } = WorkScheduler.ThreadPool;

    /// <summary>The event loop (Proxy.Transport's epoll thread) serving the connection's socket, or -1 off that engine.</summary>
    public int EventLoop { get; init; } = -1;

    /// <summary>Where the engine reports streams, resets, GOAWAYs and writes; null when the host counts nothing.</summary>
    public IProtocolMetrics? Metrics { get; init; }
}
