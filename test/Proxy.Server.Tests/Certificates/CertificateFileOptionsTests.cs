using System.Security.Cryptography.X509Certificates;
using Proxy.Transport.Certificates;

namespace Proxy.Server.Tests.Certificates;

/// <summary>Loading a configured certificate: every failure names the key and the file.</summary>
public sealed class CertificateFileOptionsTests : IDisposable
{
    private const string Key = "ProxyServer:Certificates:Default";
    private readonly CertificateFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Fact]
    public void Load_PemCertificateAndKey_HasPrivateKey()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePem(certificate);

        using var loaded = new CertificateFileOptions(Key, _files.PathOf("cert.pem"), _files.PathOf("key.pem")).Load();

        Assert.Equal(certificate.Thumbprint, loaded.Thumbprint);
        Assert.True(loaded.HasPrivateKey);
    }

    [Fact]
    public void Load_PfxWithPassword_HasPrivateKey()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePfx(certificate, "s3cret");

        using var loaded = new CertificateFileOptions(Key, _files.PathOf("cert.pfx"), Password: "s3cret").Load();

        Assert.Equal(certificate.Thumbprint, loaded.Thumbprint);
        Assert.True(loaded.HasPrivateKey);
    }

    [Fact]
    public void Load_MissingFile_NamesKeyAndFile()
    {
        var path = _files.PathOf("absent.pem");
        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, path, _files.PathOf("key.pem")).Load());
        Assert.Equal($"{Key}:Path: the file '{path}' does not exist.", ex.Message);
    }

    [Fact]
    public void Load_MissingKeyFile_NamesKeyPath()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePem(certificate);
        var keyPath = _files.PathOf("other-key.pem");
        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, _files.PathOf("cert.pem"), keyPath).Load());
        Assert.Equal($"{Key}:KeyPath: the file '{keyPath}' does not exist.", ex.Message);
    }

    [Fact]
    public void Load_WrongPfxPassword_NamesPasswordAndFile()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePfx(certificate, "right");
        var path = _files.PathOf("cert.pfx");

        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, path, Password: "wrong").Load());

        Assert.StartsWith($"{Key}:Path: '{path}' cannot be read with {Key}:Password (wrong password)", ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Load_KeyOfAnotherCertificate_SaysItDoesNotMatch()
    {
        using var first = CertificateFiles.Create();
        using var second = CertificateFiles.Create();
        _files.WritePem(first);
        _files.WritePem(second, certName: "second.pem", keyName: "second-key.pem");
        var cert = _files.PathOf("cert.pem");
        var key = _files.PathOf("second-key.pem");

        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, cert, key).Load());

        Assert.Equal($"{Key}:KeyPath: the key in '{key}' does not match the certificate in '{cert}'.", ex.Message);
    }

    [Fact]
    public void Load_PemWithoutKeyPath_SaysThereIsNoPrivateKey()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePem(certificate);
        var cert = _files.PathOf("cert.pem");

        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, cert).Load());

        Assert.StartsWith($"{Key}:Path: the certificate in '{cert}' has no private key", ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Load_GarbageInsteadOfKey_NamesKeyPath()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePem(certificate);
        _files.Replace("key.pem", "not a key");
        var key = _files.PathOf("key.pem");

        var ex = Assert.Throws<CertificateLoadException>(() => new CertificateFileOptions(Key, _files.PathOf("cert.pem"), key).Load());

        Assert.StartsWith($"{Key}:KeyPath: '{key}' holds no unencrypted PEM private key", ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Reload_BadFile_KeepsLastGoodCertificate_ThenTakesTheNextGoodOne()
    {
        using var first = CertificateFiles.Create();
        _files.WritePem(first);
        using var reloading = new ReloadingCertificate(new CertificateFileOptions(Key, _files.PathOf("cert.pem"), _files.PathOf("key.pem")));
        var failed = new TaskCompletionSource<CertificateLoadException>(TaskCreationOptions.RunContinuationsAsynchronously);
        reloading.ReloadFailed += ex => failed.TrySetResult(ex);

        _files.Replace("cert.pem", "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n");
        var failure = await failed.Task.WaitAsync(TimeSpan.FromSeconds(30));

        Assert.StartsWith($"{Key}:Path:", failure.Message, StringComparison.Ordinal);
        Assert.Equal(first.Thumbprint, reloading.Certificate.Thumbprint);

        using var second = CertificateFiles.Create();
        var reloaded = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        reloading.Reloaded += c => { if (c.Thumbprint == second.Thumbprint) reloaded.TrySetResult(c.Thumbprint); };
        _files.WritePem(second);

        Assert.Equal(second.Thumbprint, await reloaded.Task.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(second.Thumbprint, reloading.Certificate.Thumbprint);
    }

    [Fact]
    public async Task SharedWatcher_OnlyTheCertificateWhoseFilesChangedReloads()
    {
        using var a = CertificateFiles.Create();
        using var b = CertificateFiles.Create();
        _files.WritePem(a, "a.pem", "a-key.pem");
        _files.WritePem(b, "b.pem", "b-key.pem");
        using var watcher = new CertificateFileWatcher();
        using var first = new ReloadingCertificate(new CertificateFileOptions("A", _files.PathOf("a.pem"), _files.PathOf("a-key.pem")), watcher: watcher);
        using var second = new ReloadingCertificate(new CertificateFileOptions("B", _files.PathOf("b.pem"), _files.PathOf("b-key.pem")), watcher: watcher);
        var firstReloaded = false;
        first.Reloaded += _ => firstReloaded = true;
        using var next = CertificateFiles.Create();
        var reloaded = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        second.Reloaded += c => { if (c.Thumbprint == next.Thumbprint) reloaded.TrySetResult(); };

        _files.WritePem(next, "b.pem", "b-key.pem");
        await reloaded.Task.WaitAsync(TimeSpan.FromSeconds(30));

        Assert.Equal(next.Thumbprint, second.Certificate.Thumbprint);
        Assert.Equal(a.Thumbprint, first.Certificate.Thumbprint);
        Assert.False(firstReloaded);
    }

    [Fact]
    public async Task Reload_KubernetesSecretLinkSwap_NewCertificateLoaded()
    {
        if (OperatingSystem.IsWindows())
        {
            return; // The layout below is made of symbolic links and a rename over one (mv -T).
        }

        // A mounted secret: cert.pem -> ..data/cert.pem, ..data -> v1/.
        using var first = CertificateFiles.Create();
        using var second = CertificateFiles.Create();
        foreach (var (version, certificate) in new[] { ("v1", first), ("v2", second) })
        {
            Directory.CreateDirectory(_files.PathOf(version));
            File.WriteAllText(_files.PathOf($"{version}/cert.pem"), certificate.ExportCertificatePem());
            File.WriteAllText(_files.PathOf($"{version}/key.pem"), certificate.GetECDsaPrivateKey()!.ExportPkcs8PrivateKeyPem());
        }

        File.CreateSymbolicLink(_files.PathOf("..data"), "v1");
        File.CreateSymbolicLink(_files.PathOf("cert.pem"), "..data/cert.pem");
        File.CreateSymbolicLink(_files.PathOf("key.pem"), "..data/key.pem");
        using var reloading = new ReloadingCertificate(new CertificateFileOptions(Key, _files.PathOf("cert.pem"), _files.PathOf("key.pem")));
        Assert.Equal(first.Thumbprint, reloading.Certificate.Thumbprint);
        var reloaded = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        reloading.Reloaded += c => { if (c.Thumbprint == second.Thumbprint) reloaded.TrySetResult(); };

        // What the kubelet does: a new link beside the old one, renamed over it in one step.
        File.CreateSymbolicLink(_files.PathOf("..data_tmp"), "v2");
        using (var mv = System.Diagnostics.Process.Start("mv", ["-T", _files.PathOf("..data_tmp"), _files.PathOf("..data")]))
        {
            await mv.WaitForExitAsync();
            Assert.Equal(0, mv.ExitCode);
        }

        await reloaded.Task.WaitAsync(TimeSpan.FromSeconds(30));
        Assert.Equal(second.Thumbprint, reloading.Certificate.Thumbprint);
    }
}
