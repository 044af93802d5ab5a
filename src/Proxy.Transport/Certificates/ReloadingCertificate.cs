using System.Net.Security;
using System.Security.Cryptography.X509Certificates;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Proxy.Transport.Certificates;

/// <summary>
/// A certificate from files that follows the files: when one of them changes (written in place, replaced by a rename,
/// or created again), it is loaded again and the next TLS handshake uses it; connections already open keep theirs. A
/// change that does not load (a half-written file, a certificate whose new key has not arrived yet, a wrong password)
/// keeps the last good certificate and logs why; the next change tries again.
/// </summary>
// Shared: handshakes read Current (one volatile read) on any thread; file events reload under _reloadLock.
public sealed partial class ReloadingCertificate : IDisposable
{
    private readonly ILogger _logger;
    private readonly CertificateFileWatcher? _ownWatcher;
    private readonly Lock _reloadLock = new();
    private volatile Loaded _current;

    /// <summary>
    /// Loads the certificate now (throws <see cref="CertificateLoadException"/> when it cannot) and starts watching its
    /// files: with <paramref name="watcher"/>, shared with other certificates, otherwise with a watcher of its own.
    /// </summary>
    public ReloadingCertificate(CertificateFileOptions files, ILogger? logger = null, CertificateFileWatcher? watcher = null)
    {
        Files = files;
        _logger = logger ?? NullLogger.Instance;
        _current = new Loaded(files.Load());
        if (watcher is null)
        {
            _ownWatcher = watcher = new CertificateFileWatcher();
        }

        watcher.Watch(this);
    }

    /// <summary>Where the certificate comes from.</summary>
    public CertificateFileOptions Files { get; }

    /// <summary>The certificate handshakes use now.</summary>
    public X509Certificate2 Certificate => _current.Certificate;

    /// <summary>The same, ready for SslStream (its chain built once per load, not per handshake).</summary>
    public SslStreamCertificateContext Context => _current.Context;

    /// <summary>Raised after a change was loaded, with the new certificate (tests and operators wait on it).</summary>
    public event Action<X509Certificate2>? Reloaded;

    /// <summary>Raised when a change could not be loaded, with the reason; the last good certificate stays.</summary>
    public event Action<CertificateLoadException>? ReloadFailed;

    /// <summary>Loads the files again; keeps the current certificate when they do not load.</summary>
    public void Reload()
    {
        lock (_reloadLock)
        {
            X509Certificate2 loaded;
            try
            {
                loaded = Files.Load();
            }
            catch (CertificateLoadException ex)
            {
                Log.ReloadFailed(_logger, Files.ConfigPath, Certificate.Thumbprint, ex.Message);
                ReloadFailed?.Invoke(ex);
                return;
            }

            if (loaded.RawDataMemory.Span.SequenceEqual(Certificate.RawDataMemory.Span))
            {
                loaded.Dispose(); // Touched but unchanged (one event of several for the same write).
                return;
            }

            // NOTE: the previous certificate is not disposed: handshakes that read it a moment ago may still use it.
            _current = new Loaded(loaded);
            Log.Reloaded(_logger, Files.ConfigPath, loaded.Subject, loaded.Thumbprint, loaded.NotAfter);
        }

        Reloaded?.Invoke(Certificate);
    }

    /// <summary>Stops its own watcher (a shared one belongs to whoever created it).</summary>
    public void Dispose() => _ownWatcher?.Dispose();

    private sealed class Loaded(X509Certificate2 certificate)
    {
        public X509Certificate2 Certificate { get; } = certificate;

        public SslStreamCertificateContext Context { get; } = SslStreamCertificateContext.Create(certificate, additionalCertificates: null, offline: true);
    }

    private static partial class Log
    {
        [LoggerMessage(1, LogLevel.Information, "Certificate reloaded from {ConfigPath}: {Subject} (thumbprint {Thumbprint}, expires {NotAfter}); new TLS handshakes use it.")]
        public static partial void Reloaded(ILogger logger, string configPath, string subject, string thumbprint, DateTime notAfter);

        [LoggerMessage(2, LogLevel.Warning, "Certificate files of {ConfigPath} changed but did not load; keeping the current certificate (thumbprint {Thumbprint}). {Reason}")]
        public static partial void ReloadFailed(ILogger logger, string configPath, string thumbprint, string reason);
    }
}
