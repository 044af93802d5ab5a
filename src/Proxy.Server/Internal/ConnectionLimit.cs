using System.Runtime.InteropServices;

namespace Proxy.Server.Internal;

/// <summary>
/// The server's bound on open connections: the accept loops wait while it is reached, so further clients wait in the
/// kernel's listen backlog instead of taking the process's last file descriptors.
/// </summary>
/// <remarks>
/// NOTE: why by default. A process whose descriptors run out does not only fail its next accept: the runtime needs a
/// pipe to start a thread, and failing that it aborts ("Out of memory."). 400 idle TCP connections to a proxy with a
/// limit of 256 open files killed it, and with it every connection it served. HAProxy sizes its maxconn from the open-file
/// limit the same way; nginx stops at worker_connections.
/// NOTE: a soft bound: each accept loop looks before it accepts, so with several listeners each may take one connection
/// past it. The reserve below the open-file limit is far larger than that.
/// </remarks>
// Shared by the accept loops (WaitForRoomAsync, Enter) and the connections' ends (Exit); all state under _lock.
internal sealed class ConnectionLimit(long max)
{
    private readonly Lock _lock = new();
    private long _open;
    private int _waiting;
    private TaskCompletionSource? _room;

    public long Max { get; } = max;

    public long Open
    {
        get
        {
            lock (_lock)
            {
                return _open;
            }
        }
    }

    /// <summary>Accept loops waiting for a connection to end.</summary>
    public int AcceptsWaiting
    {
        get
        {
            lock (_lock)
            {
                return _waiting;
            }
        }
    }

    /// <summary>Completes at once below the bound, else when a connection ends.</summary>
    public async ValueTask WaitForRoomAsync(CancellationToken cancellationToken)
    {
        Task room;
        lock (_lock)
        {
            if (_open < Max)
            {
                return;
            }
            _room ??= new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            room = _room.Task;
            _waiting++;
        }

        try
        {
            await room.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            lock (_lock)
            {
                _waiting--;
            }
        }
    }

    public void Enter()
    {
        lock (_lock)
        {
            _open++;
        }
    }

    public void Exit()
    {
        TaskCompletionSource? wake = null;
        lock (_lock)
        {
            _open--;
            if (_open < Max && _room is { } room)
            {
                wake = room;
                _room = null;
            }
        }
        wake?.TrySetResult();
    }

    /// <summary>
    /// The least the default bound leaves beside the connections: backend connections, files, and the runtime's own.
    /// </summary>
    /// <remarks>
    /// NOTE: 256, not 128: the runtime keeps each assembly it loads open as a file, and most are loaded after the bound is
    /// derived (the standalone proxy held about 120 descriptors at that point and about 250 once it had served its first
    /// request, 220 of them assemblies). With 128 the flood test at a limit of 256 left no descriptor for the first
    /// backend socket or thread, and the process aborted ("Out of memory.") in half the runs.
    /// </remarks>
    internal const long MinimumReserve = 256;

    /// <summary>
    /// The default bound: the open-file limit less what the process holds now and a reserve (an eighth of the limit, at
    /// least <see cref="MinimumReserve"/>: backend connections, files, the runtime's own); null when the limit is unknown
    /// (not Linux) or unlimited.
    /// </summary>
    public static long? FromFileLimit(out long fileLimit)
    {
        fileLimit = 0;
        if (!OperatingSystem.IsLinux() || GetRLimit(RLimitNoFile, out var limit) != 0 || limit.Current >= long.MaxValue / 2)
        {
            return null;
        }

        fileLimit = (long)limit.Current; // the runtime raised the soft limit to the hard one at startup
        long open;
        try
        {
            open = Directory.EnumerateFileSystemEntries("/proc/self/fd").LongCount();
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            open = 0;
        }
        return Math.Max(16, fileLimit - open - Math.Max(MinimumReserve, fileLimit / 8));
    }

    private const int RLimitNoFile = 7;

    [StructLayout(LayoutKind.Sequential)]
    private struct RLimit
    {
        public ulong Current;
        public ulong Maximum;
    }

    [DllImport("libc", EntryPoint = "getrlimit", SetLastError = true)]
    private static extern int GetRLimit(int resource, out RLimit limit);
}
