using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.Testing;

/// <summary>Self-signed certificates made on the spot, for tests that need several distinct ones (rotation, SNI).</summary>
public static class ThrowawayCertificates
{
    /// <summary>An ECDSA P-256 certificate with its key, CN and DNS SAN <paramref name="dnsName"/>, valid from yesterday for a week.</summary>
    public static X509Certificate2 Create(string dnsName = "localhost")
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var request = new CertificateRequest("CN=" + dnsName, key, HashAlgorithmName.SHA256);
        var san = new SubjectAlternativeNameBuilder();
        san.AddDnsName(dnsName);
        request.CertificateExtensions.Add(san.Build());
        return request.CreateSelfSigned(DateTimeOffset.UtcNow.AddDays(-1), DateTimeOffset.UtcNow.AddDays(7));
    }
}
