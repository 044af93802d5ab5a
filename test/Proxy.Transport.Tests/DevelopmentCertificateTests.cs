using System.Net;
using System.Security.Cryptography.X509Certificates;
using Proxy.Transport.Certificates;

namespace Proxy.Transport.Tests;

public sealed class DevelopmentCertificateTests : IDisposable
{
    private readonly string _directory = Path.Combine(Path.GetTempPath(), "proxy-devcert-" + Guid.NewGuid().ToString("N"));

    public void Dispose()
    {
        if (Directory.Exists(_directory))
        {
            Directory.Delete(_directory, recursive: true);
        }
    }

    [Fact]
    public void GetOrCreate_FirstRun_CreatesLocalhostServerCertificateFile()
    {
        using var certificate = DevelopmentCertificate.GetOrCreate(_directory);

        Assert.True(File.Exists(Path.Combine(_directory, DevelopmentCertificate.FileName)));
        Assert.True(certificate.HasPrivateKey);
        Assert.Equal("CN=localhost", certificate.Subject);
        var san = certificate.Extensions.OfType<X509SubjectAlternativeNameExtension>().Single();
        Assert.Contains("localhost", san.EnumerateDnsNames());
        var ips = san.EnumerateIPAddresses().ToList();
        Assert.Contains(IPAddress.Loopback, ips);
        Assert.Contains(IPAddress.IPv6Loopback, ips);
        var eku = certificate.Extensions.OfType<X509EnhancedKeyUsageExtension>().Single();
        Assert.Contains(eku.EnhancedKeyUsages.Cast<System.Security.Cryptography.Oid>(), oid => oid.Value == "1.3.6.1.5.5.7.3.1");
    }

    [Fact]
    public void GetOrCreate_SecondRun_ReusesStoredCertificate()
    {
        using var first = DevelopmentCertificate.GetOrCreate(_directory);
        using var second = DevelopmentCertificate.GetOrCreate(_directory);
        Assert.Equal(first.Thumbprint, second.Thumbprint);
    }

    [Fact]
    public void GetOrCreate_StoredCertificateExpired_Regenerates()
    {
        using var first = DevelopmentCertificate.GetOrCreate(_directory);
        var later = new FixedTimeProvider(new DateTimeOffset(first.NotAfter.ToUniversalTime(), TimeSpan.Zero).AddDays(1));

        using var renewed = DevelopmentCertificate.GetOrCreate(_directory, later);

        Assert.NotEqual(first.Thumbprint, renewed.Thumbprint);
        Assert.True(renewed.NotAfter.ToUniversalTime() > later.Now.UtcDateTime);
        // And the renewed one is what is stored now.
        using var reloaded = DevelopmentCertificate.GetOrCreate(_directory, later);
        Assert.Equal(renewed.Thumbprint, reloaded.Thumbprint);
    }

    [Fact]
    public void GetOrCreate_CorruptFile_Replaced()
    {
        Directory.CreateDirectory(_directory);
        File.WriteAllText(Path.Combine(_directory, DevelopmentCertificate.FileName), "not a pfx");
        using var certificate = DevelopmentCertificate.GetOrCreate(_directory);
        Assert.True(certificate.HasPrivateKey);
    }
}
