using System.Security.Authentication;

namespace Proxy.Transport;

/// <summary>
/// Bytes moved by a socket connection, reported to the host (Proxy.Server counts them as <c>proxy.server.io</c>).
/// Called by the socket's receive and send loops after every completed operation: must be thread-safe and cheap.
/// </summary>
public interface ISocketIoMetrics
{
    /// <summary>Bytes read from the socket (what the peer sent, TLS records included).</summary>
    void Received(int bytes);

    /// <summary>Bytes written to the socket.</summary>
    void Sent(long bytes);
}

/// <summary>
/// TLS handshakes as <see cref="Tls.TlsConnectionMiddleware"/> runs them, reported to the host (Proxy.Server counts
/// them as <c>kestrel.active_tls_handshakes</c> and <c>kestrel.tls_handshake.duration</c>). Thread-safe.
/// </summary>
public interface ITlsHandshakeMetrics
{
    /// <summary>A handshake starts on <paramref name="connection"/>. Returns whether it was counted active (pass it back at the end).</summary>
    bool HandshakeStarted(ConnectionContext connection);

    /// <summary>
    /// The handshake ended after <paramref name="duration"/>: with the negotiated <paramref name="protocol"/>, or failed
    /// with <paramref name="error"/> (the exception, or null for a timeout or a peer that closed).
    /// </summary>
    void HandshakeEnded(ConnectionContext connection, bool counted, TimeSpan duration, SslProtocols? protocol, Exception? error, bool timedOut);
}
