using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Proxy.Transport.Certificates;

/// <summary>
/// A certificate kept in files, with Kestrel's keys: <c>Path</c> (a PKCS#12 file, or a PEM certificate),
/// <c>KeyPath</c> (the PEM private key of a PEM certificate) and <c>Password</c> (of the PKCS#12 file, or of an encrypted
/// PEM key). <see cref="ConfigPath"/> is where it was configured (<c>ProxyServer:Certificates:Default</c>): every error
/// names that key and the file.
/// </summary>
public sealed record CertificateFileOptions(string ConfigPath, string Path, string? KeyPath = null, string? Password = null)
{
    /// <summary>The files to watch for rotation.</summary>
    public IEnumerable<string> Files => KeyPath is null ? [Path] : [Path, KeyPath];

    /// <summary>
    /// Loads the certificate with its private key. Throws <see cref="CertificateLoadException"/> naming the key and the file
    /// for a missing file, a wrong password, a file that holds no certificate or key, and a key that does not match.
    /// </summary>
    public X509Certificate2 Load()
    {
        var certificate = KeyPath is null ? LoadSingleFile() : LoadPemPair(KeyPath);
        if (!certificate.HasPrivateKey)
        {
            certificate.Dispose();
            throw new CertificateLoadException($"{ConfigPath}:Path: the certificate in '{Full(Path)}' has no private key; set {ConfigPath}:KeyPath to its PEM key file, or use a PKCS#12 (.pfx) file that holds the key.");
        }

        return certificate;
    }

    private X509Certificate2 LoadSingleFile()
    {
        var bytes = Read(Path, "Path");
        if (LooksLikePem(bytes))
        {
            // A PEM file with the certificate and, maybe, its key in one file (Kestrel accepts that too).
            var text = System.Text.Encoding.ASCII.GetString(bytes);
            var certificate = PemCertificate(text, Path);
            return text.Contains("PRIVATE KEY-----", StringComparison.Ordinal) ? WithKey(certificate, text, Path, "Path") : certificate;
        }

        try
        {
            return X509CertificateLoader.LoadPkcs12(bytes, Password);
        }
        catch (CryptographicException ex)
        {
            var why = Password is null
                ? $"cannot be read without a password (set {ConfigPath}:Password), or is not a PKCS#12 file"
                : $"cannot be read with {ConfigPath}:Password (wrong password), or is not a PKCS#12 file";
            throw new CertificateLoadException($"{ConfigPath}:Path: '{Full(Path)}' {why}: {ex.Message}", ex);
        }
    }

    private X509Certificate2 LoadPemPair(string keyPath)
    {
        var certificate = PemCertificate(System.Text.Encoding.ASCII.GetString(Read(Path, "Path")), Path);
        var keyText = System.Text.Encoding.ASCII.GetString(Read(keyPath, "KeyPath"));
        return WithKey(certificate, keyText, keyPath, "KeyPath");
    }

    private X509Certificate2 PemCertificate(string text, string path)
    {
        try
        {
            return X509Certificate2.CreateFromPem(text);
        }
        catch (CryptographicException ex)
        {
            throw new CertificateLoadException($"{ConfigPath}:Path: '{Full(path)}' holds no PEM certificate ('-----BEGIN CERTIFICATE-----'): {ex.Message}", ex);
        }
    }

    /// <summary>The certificate joined to the PEM key in <paramref name="keyText"/>, after checking the two belong together.</summary>
    private X509Certificate2 WithKey(X509Certificate2 certificate, string keyText, string keyPath, string keyName)
    {
        using (certificate)
        {
            using AsymmetricAlgorithm key = certificate.GetKeyAlgorithm() switch
            {
                "1.2.840.113549.1.1.1" => RSA.Create(),
                "1.2.840.10045.2.1" => ECDsa.Create(),
                var other => throw new CertificateLoadException($"{ConfigPath}:Path: the certificate in '{Full(Path)}' has a key of type {other}; only RSA and ECDSA are supported."),
            };
            try
            {
                if (Password is null)
                {
                    key.ImportFromPem(keyText);
                }
                else
                {
                    key.ImportFromEncryptedPem(keyText, Password);
                }
            }
            catch (Exception ex) when (ex is ArgumentException or CryptographicException)
            {
                var why = Password is null ? "holds no unencrypted PEM private key of the certificate's type" : $"holds no PEM private key that {ConfigPath}:Password decrypts";
                throw new CertificateLoadException($"{ConfigPath}:{keyName}: '{Full(keyPath)}' {why}: {ex.Message}", ex);
            }

            X509Certificate2 joined;
            try
            {
                joined = key switch
                {
                    RSA rsa => certificate.CopyWithPrivateKey(rsa),
                    _ => certificate.CopyWithPrivateKey((ECDsa)key),
                };
            }
            catch (ArgumentException ex)
            {
                throw new CertificateLoadException($"{ConfigPath}:{keyName}: the key in '{Full(keyPath)}' does not match the certificate in '{Full(Path)}'.", ex);
            }

            // NOTE: SslStream on Windows cannot use an ephemeral key; a PKCS#12 round trip gives it a usable one.
            if (OperatingSystem.IsWindows())
            {
                using (joined)
                {
                    return X509CertificateLoader.LoadPkcs12(joined.Export(X509ContentType.Pkcs12), null);
                }
            }

            return joined;
        }
    }

    private byte[] Read(string path, string key)
    {
        try
        {
            return File.ReadAllBytes(path);
        }
        catch (Exception ex) when (ex is FileNotFoundException or DirectoryNotFoundException)
        {
            throw new CertificateLoadException($"{ConfigPath}:{key}: the file '{Full(path)}' does not exist.", ex);
        }
        catch (Exception ex) when (ex is IOException or UnauthorizedAccessException)
        {
            throw new CertificateLoadException($"{ConfigPath}:{key}: the file '{Full(path)}' cannot be read: {ex.Message}", ex);
        }
    }

    private static bool LooksLikePem(byte[] bytes) =>
        bytes.AsSpan().IndexOf("-----BEGIN "u8) >= 0;

    private static string Full(string path) => System.IO.Path.GetFullPath(path);
}

/// <summary>A configured certificate could not be loaded; the message names the configuration key and the file.</summary>
public sealed class CertificateLoadException(string message, Exception? inner = null) : InvalidOperationException(message, inner);
