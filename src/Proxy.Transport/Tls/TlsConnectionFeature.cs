using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features; // ITlsApplicationProtocolFeature lives here (an interface only).

namespace Proxy.Transport.Tls;

// Immutable after the handshake (set once by the TLS middleware, read by anyone).
/// <summary>What the TLS handshake negotiated, exposed through the ASP.NET Core TLS features.</summary>
public sealed class TlsConnectionFeature : ITlsConnectionFeature, ITlsHandshakeFeature, ITlsApplicationProtocolFeature
{
    private readonly SslStream _sslStream;

    internal TlsConnectionFeature(SslStream sslStream)
    {
        _sslStream = sslStream;
        Protocol = sslStream.SslProtocol;
        NegotiatedCipherSuite = sslStream.NegotiatedCipherSuite;
        ApplicationProtocol = sslStream.NegotiatedApplicationProtocol.Protocol;
        HostName = sslStream.TargetHostName;
        ClientCertificate = sslStream.RemoteCertificate as X509Certificate2;
    }

    public X509Certificate2? ClientCertificate { get; set; }

    public Task<X509Certificate2?> GetClientCertificateAsync(CancellationToken cancellationToken) => Task.FromResult(ClientCertificate);

    public SslProtocols Protocol { get; }

    public TlsCipherSuite? NegotiatedCipherSuite { get; }

    public string HostName { get; }

    /// <summary>The ALPN protocol, empty when none was negotiated.</summary>
    public ReadOnlyMemory<byte> ApplicationProtocol { get; }

#pragma warning disable SYSLIB0058, CS0618 // The legacy members are part of the interface; SslStream still reports them.
    public CipherAlgorithmType CipherAlgorithm => _sslStream.CipherAlgorithm;
    public int CipherStrength => _sslStream.CipherStrength;
    public HashAlgorithmType HashAlgorithm => _sslStream.HashAlgorithm;
    public int HashStrength => _sslStream.HashStrength;
    public ExchangeAlgorithmType KeyExchangeAlgorithm => _sslStream.KeyExchangeAlgorithm;
    public int KeyExchangeStrength => _sslStream.KeyExchangeStrength;
#pragma warning restore SYSLIB0058, CS0618
}
