using Microsoft.Extensions.FileProviders;
using Microsoft.Extensions.Primitives;
using Proxy.Transport;

namespace Proxy.Host;

/// <summary>
/// The files of one folder for the configuration's JSON sources (the config file, appsettings*.json), with change
/// tokens that watch that folder alone.
/// </summary>
/// <remarks>
/// NOTE: <see cref="PhysicalFileProvider"/> watches its root and every folder under it (on Linux one inotify watch per
/// folder, added at startup). A proxy started from a large tree paid for that: run from <c>/usr</c> (19,000 folders) it
/// took 38,752 watches, 17 MB more memory and 0.7 s more to start, a larger tree can use up
/// <c>fs.inotify.max_user_watches</c> (shared by all of the user's processes), and every file written anywhere under the
/// folder (a log redirected into it) woke the watcher's thread.
/// Here one watcher per folder, not recursive: the files in the folder itself are what configuration reads.
/// Which file an event concerns (its name, a rename's old name, a Kubernetes <c>..data</c> link swap) is
/// <see cref="FolderEvents.Concerns"/>, as for certificates.
/// NOTE: with <c>DOTNET_USE_POLLING_FILE_WATCHER</c> set (network shares, some container mounts, where inotify sees no
/// change) the files are polled as <see cref="PhysicalFileProvider"/> does, and no watcher is made.
/// </remarks>
// Owned by ConfigFolders (one per folder, per host); the configuration sources of that host use it. Watch runs on the
// configuration's threads, the file events on the watcher's thread: both synchronise on _lock.
internal sealed class FolderFileProvider : IFileProvider, IDisposable
{
    private readonly PhysicalFileProvider _files;
    private readonly Lock _lock = new();
    // NOTE: names compared ignoring case, as PhysicalFileProvider does: on Windows and macOS "AppSettings.json" is the
    // file configuration reads as "appsettings.json". On Linux two names that differ only in case cost an extra reload.
    private readonly Dictionary<string, CancellationTokenSource> _changes = new(StringComparer.OrdinalIgnoreCase);
    // NOTE: read once: PhysicalFileProvider answers false to UsePollingFileWatcher once its own watcher exists (its
    // first Watch), so asking on every Watch would poll the first file only.
    private readonly bool _poll;
    private FileSystemWatcher? _watcher;
    private bool _disposed;

    public FolderFileProvider(string folder)
    {
        _files = new PhysicalFileProvider(Path.GetFullPath(folder));
        _poll = _files.UsePollingFileWatcher;
    }

    public IFileInfo GetFileInfo(string subpath) => _files.GetFileInfo(subpath);

    public IDirectoryContents GetDirectoryContents(string subpath) => _files.GetDirectoryContents(subpath);

    /// <summary>
    /// A token that changes when the file named <paramref name="filter"/> in the folder is written, created, deleted or
    /// renamed (to or from that name). A name with a folder or a wildcard in it is not one of this folder's files: no
    /// change is ever reported for it.
    /// </summary>
    public IChangeToken Watch(string filter)
    {
        if (_poll)
        {
            return _files.Watch(filter);
        }

        var name = filter.TrimStart('/', '\\');
        if (name.Length == 0 || name.AsSpan().IndexOfAny("/\\*?") >= 0)
        {
            return NullChangeToken.Singleton;
        }

        lock (_lock)
        {
            if (_disposed)
            {
                return NullChangeToken.Singleton; // a reload still running as the host stops
            }

            if (_watcher is null)
            {
                var watcher = FolderEvents.CreateWatcher(_files.Root);
                watcher.Changed += OnFileEvent;
                watcher.Created += OnFileEvent;
                watcher.Deleted += OnFileEvent;
                watcher.Renamed += OnFileEvent;
                watcher.Error += OnWatcherError;
                watcher.EnableRaisingEvents = true;
                _watcher = watcher;
            }

            if (!_changes.TryGetValue(name, out var change))
            {
                change = new CancellationTokenSource();
                _changes[name] = change;
            }

            return new CancellationChangeToken(change.Token);
        }
    }

    private void OnFileEvent(object sender, FileSystemEventArgs e)
    {
        List<CancellationTokenSource>? changed = null;
        lock (_lock)
        {
            foreach (var name in _changes.Keys.Where(name => FolderEvents.Concerns(e, name, _changes.Comparer)).ToList())
            {
                _changes.Remove(name, out var change);
                (changed ??= []).Add(change!);
            }
        }

        Signal(changed);
    }

    // The kernel's queue overflowed (a burst of events in the folder): a change to a watched file may be among the lost.
    private void OnWatcherError(object sender, ErrorEventArgs e)
    {
        List<CancellationTokenSource> changed;
        lock (_lock)
        {
            changed = [.. _changes.Values];
            _changes.Clear();
        }

        Signal(changed);
    }

    // NOTE: on the thread pool, as PhysicalFilesWatcher does: the tokens' callbacks are the configuration's reload, which
    // can throw (a value an options class refuses; ConfigFileSource reports and keeps invalid JSON). Thrown here, on the
    // watcher's thread, that ended the process; in a task only that reload fails, and the next change reloads. The
    // sources are not disposed: a consumer may still register on a token, which then runs its callback at once.
    private static void Signal(List<CancellationTokenSource>? changed)
    {
        if (changed is null)
        {
            return;
        }

        foreach (var change in changed)
        {
            _ = Task.Factory.StartNew(static state => ((CancellationTokenSource)state!).Cancel(), change,
                CancellationToken.None, TaskCreationOptions.DenyChildAttach, TaskScheduler.Default);
        }
    }

    public void Dispose()
    {
        lock (_lock)
        {
            _disposed = true;
            _watcher?.Dispose();
            _watcher = null;
            _changes.Clear();
        }

        _files.Dispose();
    }
}

/// <summary>The <see cref="FolderFileProvider"/>s of the host's configuration, one per folder, disposed with the host.</summary>
// Owned by ProxyHostApp (BuildAsync creates it, DisposeAsync or a failed build disposes it); used on the building thread.
internal sealed class ConfigFolders : IDisposable
{
    private readonly Dictionary<string, FolderFileProvider> _folders = new(StringComparer.Ordinal);

    /// <summary>The provider of <paramref name="folder"/>, made on first use.</summary>
    public FolderFileProvider For(string folder)
    {
        var root = Path.GetFullPath(folder);
        if (!_folders.TryGetValue(root, out var provider))
        {
            provider = new FolderFileProvider(root);
            _folders[root] = provider;
        }

        return provider;
    }

    public void Dispose()
    {
        foreach (var provider in _folders.Values)
        {
            provider.Dispose();
        }

        _folders.Clear();
    }
}
