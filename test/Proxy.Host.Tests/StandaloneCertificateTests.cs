using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.Host.Tests;

/// <summary>The standalone proxy on our server with a certificate from configuration (ProxyServer:Certificates:Default).</summary>
public sealed class StandaloneCertificateTests
{
    private static X509Certificate2 CreateCertificate()
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        return new CertificateRequest("CN=proxy.test", key, HashAlgorithmName.SHA256)
            .CreateSelfSigned(DateTimeOffset.UtcNow.AddDays(-1), DateTimeOffset.UtcNow.AddDays(7));
    }

    [Fact]
    public async Task CertificatesDefault_PemFiles_ServedOnHttpsUrl()
    {
        using var files = new TempFolder();
        using var certificate = CreateCertificate();
        var certPath = files.Write("proxy.pem", certificate.ExportCertificatePem());
        var keyPath = files.Write("proxy-key.pem", certificate.GetECDsaPrivateKey()!.ExportPkcs8PrivateKeyPem());
        await using var proxy = await HostRunner.StartAsync(
            $"--ProxyServer:Certificates:Default:Path={certPath}", $"--ProxyServer:Certificates:Default:KeyPath={keyPath}");
        string? presented = null;
        using var client = new HttpClient(new SocketsHttpHandler
        {
            SslOptions = { RemoteCertificateValidationCallback = (_, c, _, _) => { presented = new X509Certificate2(c!).Thumbprint; return true; } },
        }) { DefaultRequestVersion = System.Net.HttpVersion.Version20, DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact };

        using var response = await client.GetAsync(new Uri(proxy.Https, "/no-such-route"));

        Assert.Equal(System.Net.HttpVersion.Version20, response.Version);
        Assert.Equal(certificate.Thumbprint, presented);
    }

    [Fact]
    public async Task RunAsync_MissingCertificateFile_ExitsOneNamingKeyAndFile()
    {
        using var folder = new TempFolder();
        var missing = Path.Combine(folder.Path, "absent.pfx");
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--ProxyServer:Certificates:Default:Path={missing}"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains($"ProxyServer:Certificates:Default:Path: the file '{missing}' does not exist.", error.ToString());
    }
}
