using System.Security.Cryptography.X509Certificates;

namespace Proxy.Server.Tests.Certificates;

/// <summary>Throwaway certificates written as PEM and PKCS#12 files in a temporary folder that goes away with the test.</summary>
internal sealed class CertificateFiles : IDisposable
{
    public CertificateFiles()
    {
        Directory.CreateDirectory(Folder);
    }

    public string Folder { get; } = Path.Combine(Path.GetTempPath(), "proxy-cert-tests-" + Guid.NewGuid().ToString("N"));

    public string PathOf(string name) => Path.Combine(Folder, name);

    /// <summary>A self-signed ECDSA certificate with its key, valid now, for <paramref name="dnsName"/>.</summary>
    public static X509Certificate2 Create(string dnsName = "localhost") => Proxy.Testing.ThrowawayCertificates.Create(dnsName);

    /// <summary>
    /// Writes the certificate and its key as PEM under the given names. Each file is written beside its target and renamed
    /// over it, as rotation tools do, so a reader never sees half a file.
    /// </summary>
    public void WritePem(X509Certificate2 certificate, string certName = "cert.pem", string keyName = "key.pem")
    {
        Replace(certName, certificate.ExportCertificatePem());
        Replace(keyName, certificate.GetECDsaPrivateKey()!.ExportPkcs8PrivateKeyPem());
    }

    public void WritePfx(X509Certificate2 certificate, string? password, string name = "cert.pfx") =>
        File.WriteAllBytes(PathOf(name), certificate.Export(X509ContentType.Pkcs12, password));

    public void Replace(string name, string text)
    {
        var temp = PathOf(name + ".tmp");
        File.WriteAllText(temp, text);
        File.Move(temp, PathOf(name), overwrite: true);
    }

    public void Dispose()
    {
        try
        {
            Directory.Delete(Folder, recursive: true);
        }
        catch (IOException)
        {
            // A watcher may still hold the folder for a moment; the OS cleans temp.
        }
    }
}
