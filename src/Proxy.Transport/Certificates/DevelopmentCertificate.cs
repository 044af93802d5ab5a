using System.Net;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.Transport.Certificates;

/// <summary>
/// A self-signed certificate for https endpoints without a configured one, so `dotnet run`
/// works on a fresh machine. Generated on first use, kept as a PFX in the user's profile
/// ($HOME/.proxy/dev-cert.pfx), reused afterwards, regenerated when it expires.
/// Not trusted by clients unless the user trusts it; never meant for production.
/// </summary>
public static class DevelopmentCertificate
{
    public const string FileName = "dev-cert.pfx";
    private const string ServerAuthOid = "1.3.6.1.5.5.7.3.1";
    private static readonly Lock s_lock = new();

    /// <summary>$HOME/.proxy (the user profile folder, on every OS).</summary>
    public static string DefaultDirectory =>
        Path.Combine(Environment.GetFolderPath(Environment.SpecialFolder.UserProfile), ".proxy");

    /// <summary>Loads the stored certificate, or creates and stores a new one when it is missing, unreadable or about to expire.</summary>
    public static X509Certificate2 GetOrCreate(string? directory = null, TimeProvider? time = null)
    {
        directory ??= DefaultDirectory;
        var now = (time ?? TimeProvider.System).GetUtcNow();
        var path = Path.Combine(directory, FileName);
        lock (s_lock)
        {
            var existing = TryLoad(path, now);
            if (existing is not null)
            {
                return existing;
            }

            Directory.CreateDirectory(directory);
            using var created = Create(now);
            var pfx = created.Export(X509ContentType.Pfx);
            // Write then rename: a crash mid-write never leaves a half file that looks valid.
            var temp = path + "." + Guid.NewGuid().ToString("N") + ".tmp";
            File.WriteAllBytes(temp, pfx);
            if (!OperatingSystem.IsWindows())
            {
                File.SetUnixFileMode(temp, UnixFileMode.UserRead | UnixFileMode.UserWrite); // The private key is inside.
            }
            File.Move(temp, path, overwrite: true);
            // Reload from the PFX: an ephemeral in-memory key does not work with SslStream on every OS.
            return X509CertificateLoader.LoadPkcs12(pfx, password: null);
        }
    }

    /// <summary>Creates a new certificate: CN=localhost, SAN localhost/127.0.0.1/::1, ECDSA P-256, serverAuth, one year.</summary>
    public static X509Certificate2 Create(DateTimeOffset now)
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var request = new CertificateRequest("CN=localhost", key, HashAlgorithmName.SHA256);
        var san = new SubjectAlternativeNameBuilder();
        san.AddDnsName("localhost");
        san.AddIpAddress(IPAddress.Loopback);
        san.AddIpAddress(IPAddress.IPv6Loopback);
        request.CertificateExtensions.Add(san.Build());
        request.CertificateExtensions.Add(new X509BasicConstraintsExtension(false, false, 0, true));
        request.CertificateExtensions.Add(new X509KeyUsageExtension(X509KeyUsageFlags.DigitalSignature, critical: true));
        request.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension([new Oid(ServerAuthOid)], critical: false));
        request.CertificateExtensions.Add(new X509SubjectKeyIdentifierExtension(request.PublicKey, false));
        // Backdate a little: clocks of client and server differ.
        return request.CreateSelfSigned(now.AddDays(-1), now.AddYears(1));
    }

    private static X509Certificate2? TryLoad(string path, DateTimeOffset now)
    {
        if (!File.Exists(path))
        {
            return null;
        }
        X509Certificate2 certificate;
        try
        {
            certificate = X509CertificateLoader.LoadPkcs12FromFile(path, password: null);
        }
        catch (CryptographicException)
        {
            return null; // Corrupt or foreign file: replace it.
        }
        // Renew a day early so a long-running process does not start with a certificate that expires mid-run.
        if (!certificate.HasPrivateKey || certificate.NotAfter.ToUniversalTime() <= now.UtcDateTime.AddDays(1)
            || certificate.NotBefore.ToUniversalTime() > now.UtcDateTime)
        {
            certificate.Dispose();
            return null;
        }
        return certificate;
    }
}
