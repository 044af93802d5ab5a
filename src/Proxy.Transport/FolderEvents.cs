namespace Proxy.Transport;

/// <summary>
/// File events of one folder, not the tree under it, and which file an event concerns: shared by the certificate
/// watcher and the host's config files.
/// </summary>
/// <remarks>
/// NOTE: a folder, not a file: a rename over the file (how editors, rotation tools and Kubernetes replace files) is only
/// seen there, and a watch on a single file name would miss its re-creation. Not recursive: on Linux each folder
/// watched is an inotify watch, and every file written under a watched tree wakes the watcher's thread.
/// </remarks>
// Stateless.
public static class FolderEvents
{
    /// <summary>A watcher of <paramref name="folder"/> alone, for writes, creations, renames and size changes; not yet raising events.</summary>
    public static FileSystemWatcher CreateWatcher(string folder) => new(folder)
    {
        IncludeSubdirectories = false,
        NotifyFilter = NotifyFilters.FileName | NotifyFilters.LastWrite | NotifyFilters.Size | NotifyFilters.CreationTime,
    };

    /// <summary>
    /// True when <paramref name="e"/> may have changed the file named <paramref name="fileName"/> in the folder: its own
    /// name, the old name of a rename, or a link swap. Kubernetes mounts a secret's or ConfigMap's files as links through
    /// <c>..data</c>, which it swaps to a new folder with one rename: the files' own names never appear in an event, so
    /// such a swap concerns every file of the folder.
    /// </summary>
    public static bool Concerns(FileSystemEventArgs e, string fileName, IEqualityComparer<string> comparer) =>
        e.Name?.StartsWith("..", StringComparison.Ordinal) == true
        || comparer.Equals(fileName, e.Name)
        || (e is RenamedEventArgs renamed && comparer.Equals(fileName, renamed.OldName));
}
