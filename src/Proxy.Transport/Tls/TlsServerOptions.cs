using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using Proxy.Transport.Buffers;

namespace Proxy.Transport.Tls;

/// <summary>Whether the server asks for a client certificate.</summary>
public enum ClientCertificateMode
{
    NoCertificate,
    AllowCertificate,
    RequireCertificate,
}

/// <summary>Options of <see cref="TlsConnectionMiddleware"/>.</summary>
public sealed class TlsServerOptions
{
    /// <summary>The server certificate (with private key).</summary>
    public X509Certificate2? ServerCertificate { get; set; }

    /// <summary>
    /// Chooses the certificate per handshake from the client's SNI host name (null when it sent none): an SNI map, or a
    /// certificate that is reloaded when its files change. Wins over <see cref="ServerCertificate"/>. Returning null fails
    /// the handshake (no certificate for that name).
    /// </summary>
    public Func<string?, SslStreamCertificateContext?>? ServerCertificateSelector { get; set; }

    /// <summary>ALPN protocols offered, in preference order (RFC 7301). Defaults to "h2", "http/1.1".</summary>
    public List<SslApplicationProtocol> ApplicationProtocols { get; set; } =
        [SslApplicationProtocol.Http2, SslApplicationProtocol.Http11];

    /// <summary>TLS 1.2 and 1.3 only (RFC 9113 §9.2: HTTP/2 over TLS MUST use TLS 1.2 or higher).</summary>
    public SslProtocols EnabledSslProtocols { get; set; } = SslProtocols.Tls12 | SslProtocols.Tls13;

    /// <summary>Time allowed for the handshake; a slow or silent client is dropped after it.</summary>
    public TimeSpan HandshakeTimeout { get; set; } = TimeSpan.FromSeconds(10);

    public ClientCertificateMode ClientCertificateMode { get; set; } = ClientCertificateMode.NoCertificate;

    /// <summary>Custom client certificate validation; when null, a presented certificate must chain without errors.</summary>
    public Func<X509Certificate2, X509Chain?, SslPolicyErrors, bool>? ClientCertificateValidation { get; set; }

    /// <summary>
    /// Largest single SslStream write: bytes pending in the output pipe are coalesced into one
    /// contiguous buffer of up to this size per write, instead of one write per pipe segment.
    /// </summary>
    public int MaxCoalescedWriteSize { get; set; } = 64 * 1024;

    /// <summary>Bytes the protocol may have written but not yet encrypted before its FlushAsync waits.</summary>
    public long MaxOutputBufferSize { get; set; } = 1024 * 1024;

    /// <summary>
    /// Lets OpenSSL free each connection's record buffers (about 34 KB) while they are empty
    /// (<c>SSL_MODE_RELEASE_BUFFERS</c>, see <see cref="OpenSslIdleBuffers"/>). Linux only; elsewhere it does nothing.
    /// </summary>
    public bool ReleaseIdleBuffers { get; set; } = true;

    /// <summary>Decrypted bytes the protocol has not consumed before the input pump stops reading the connection.</summary>
    public long MaxInputBufferSize { get; set; } = 1024 * 1024;

    /// <summary>Pool of the input pipe's segments (decrypted bytes waiting for the protocol): unpinned, 4 KiB / 16 KiB.</summary>
    public MemoryPool<byte> InputMemoryPool { get; set; } = BlockMemoryPool.TlsOutputDefault;

    /// <summary>Pool of the output pipe's segments (the plaintext waiting for encryption).</summary>
    public MemoryPool<byte> OutputMemoryPool { get; set; } = BlockMemoryPool.TlsOutputDefault;

    /// <summary>Test hook: wraps the SslStream the output pump writes to (to observe write sizes).</summary>
    internal Func<Stream, Stream>? OutputStreamWrapper { get; set; }
}
