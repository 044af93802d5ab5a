using System.Net;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// One self-signed server certificate per test run (CN=localhost, SAN localhost + 127.0.0.1).
/// Clients trust exactly this certificate: HttpClient by comparing it, grpc-js through the PEM
/// file as its root, curl with -k (nghttp and h2load do not verify).
/// </summary>
public static class TestCertificate
{
    private static readonly Lazy<X509Certificate2> s_certificate = new(Create);
    private static readonly Lazy<string> s_pemPath = new(WritePem);

    public static X509Certificate2 Certificate => s_certificate.Value;

    /// <summary>The certificate (public part only) as a PEM file, for clients that take a root CA file.</summary>
    public static string PemPath => s_pemPath.Value;

    /// <summary>The host name the certificate is issued to (for TLS name overrides).</summary>
    public const string HostName = "localhost";

    /// <summary>True when <paramref name="presented"/> is our test certificate.</summary>
    public static bool IsTestCertificate(X509Certificate? presented) =>
        presented is not null && presented.GetCertHashString() == Certificate.GetCertHashString();

    private static X509Certificate2 Create()
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var request = new CertificateRequest($"CN={HostName}", key, HashAlgorithmName.SHA256);
        var san = new SubjectAlternativeNameBuilder();
        san.AddDnsName(HostName);
        san.AddIpAddress(IPAddress.Loopback);
        request.CertificateExtensions.Add(san.Build());
        // NOTE: a self-signed leaf doubles as its own root for grpc-js (OpenSSL), which wants CA:TRUE on
        // a certificate it is given as a trust anchor, and serverAuth for the TLS server role.
        request.CertificateExtensions.Add(new X509BasicConstraintsExtension(true, false, 0, true));
        request.CertificateExtensions.Add(new X509KeyUsageExtension(
            X509KeyUsageFlags.DigitalSignature | X509KeyUsageFlags.KeyCertSign, critical: true));
        request.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension(
            [new Oid("1.3.6.1.5.5.7.3.1")], critical: false));
        var now = DateTimeOffset.UtcNow;
        using var created = request.CreateSelfSigned(now.AddDays(-1), now.AddDays(7));
        // Round-trip through PKCS#12 so the private key is usable by SslStream on every platform.
        return X509CertificateLoader.LoadPkcs12(created.Export(X509ContentType.Pkcs12), password: null);
    }

    private static string WritePem()
    {
        var path = Path.Combine(Path.GetTempPath(), $"proxy-functional-{Environment.ProcessId}-{Guid.NewGuid():N}.pem");
        File.WriteAllText(path, Certificate.ExportCertificatePem());
        // One file per test process: removed when the process exits, so runs leave nothing in /tmp.
        AppDomain.CurrentDomain.ProcessExit += (_, _) => File.Delete(path);
        return path;
    }
}
