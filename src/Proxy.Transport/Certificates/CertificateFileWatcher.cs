namespace Proxy.Transport.Certificates;

/// <summary>
/// Watches the folders of certificate files and tells each <see cref="ReloadingCertificate"/> when one of its files
/// changed. NOTE: one watcher per folder, shared by every certificate in it: on Linux each watcher is an inotify instance,
/// and a user gets 128 by default, so an SNI map of many certificates must not take one each.
/// </summary>
// Shared by the certificates it watches; Watch and the file events synchronise on _lock.
public sealed class CertificateFileWatcher : IDisposable
{
    private readonly Lock _lock = new();
    private readonly Dictionary<string, FileSystemWatcher> _watchers = new(StringComparer.Ordinal);
    private readonly List<(string Folder, string Name, ReloadingCertificate Certificate)> _files = [];

    /// <summary>Starts reloading <paramref name="certificate"/> when one of its files is written, created or renamed into place.</summary>
    public void Watch(ReloadingCertificate certificate)
    {
        lock (_lock)
        {
            foreach (var file in certificate.Files.Files.Select(Path.GetFullPath))
            {
                var folder = Path.GetDirectoryName(file)!; // the folder, not the file (FolderEvents)
                _files.Add((folder, Path.GetFileName(file), certificate));
                if (_watchers.ContainsKey(folder))
                {
                    continue;
                }

                var watcher = FolderEvents.CreateWatcher(folder);
                watcher.Changed += OnFileEvent;
                watcher.Created += OnFileEvent;
                watcher.Renamed += OnFileEvent;
                watcher.EnableRaisingEvents = true;
                _watchers[folder] = watcher;
            }
        }
    }

    private void OnFileEvent(object sender, FileSystemEventArgs e)
    {
        var folder = ((FileSystemWatcher)sender).Path;
        List<ReloadingCertificate> affected;
        lock (_lock)
        {
            affected = _files
                .Where(f => f.Folder == folder && FolderEvents.Concerns(e, f.Name, StringComparer.Ordinal))
                .Select(f => f.Certificate)
                .Distinct()
                .ToList();
        }

        foreach (var certificate in affected)
        {
            certificate.Reload();
        }
    }

    public void Dispose()
    {
        lock (_lock)
        {
            foreach (var watcher in _watchers.Values)
            {
                watcher.Dispose();
            }

            _watchers.Clear();
        }
    }
}
