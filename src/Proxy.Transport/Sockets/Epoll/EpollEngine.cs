using System.Net.Sockets;
using System.Runtime.InteropServices;

namespace Proxy.Transport.Sockets.Epoll;

// Thread-safe: any thread registers and unregisters; each epoll thread owns its epoll instance and only reads the
// registration table (an array replaced whole when it grows).
/// <summary>
/// A readiness-based socket engine: a few threads, each waiting on its own epoll instance, to which sockets are added
/// once, edge-triggered, for reading and writing. An event only marks a socket readable or writable and, when its
/// receive or send loop is waiting for that, resumes the loop on the epoll thread. A loop reads or writes on its own
/// thread and waits for an event only once a call found nothing to do (a short read, EAGAIN, a short send), so a
/// socket is read once per arrival instead of once more to learn that nothing is left (the runtime's engine tries
/// every receive before it waits, which costs an extra recv per message).
/// </summary>
internal sealed unsafe class EpollEngine
{
    private const int MaxEvents = 256;

    // The work deferred to the end of this epoll thread's current batch of events; null on every other thread.
    [ThreadStatic] private static DeferredWork? t_deferred;

    private static readonly Lock s_sharedLock = new();
    private static EpollEngine? s_shared;

    private readonly int[] _epollFds;
    private readonly Lock _lock = new();
    private EpollSocket?[] _slots = new EpollSocket?[64];
    private int[] _freeSlots = new int[64];
    private int _freeCount;
    private int _slotsUsed;
    private uint _generation;
    private int _next;

    /// <summary>True on Linux.</summary>
    public static bool IsSupported => OperatingSystem.IsLinux();

    /// <summary>
    /// The process's engine, or null where epoll is not there. The first caller decides its number of threads:
    /// <paramref name="threads"/>, or one per core when 0. A later caller that passes 0 takes the engine as it runs; one
    /// that names another number gets an <see cref="InvalidOperationException"/>: every listener and backend connection
    /// of the process shares the engine.
    /// </summary>
    public static EpollEngine? GetShared(int threads = 0)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(threads);
        if (!IsSupported)
        {
            return null;
        }

        var engine = Volatile.Read(ref s_shared);
        if (engine is null)
        {
            lock (s_sharedLock)
            {
                engine = s_shared ??= new EpollEngine(threads > 0 ? threads : Environment.ProcessorCount);
            }
        }

        if (threads > 0 && engine.ThreadCount != threads)
        {
            throw new InvalidOperationException(
                $"Sockets:EpollThreads is {threads}, but this process's epoll engine already runs {engine.ThreadCount} threads: the engine is shared by every listener and backend connection of the process, so give them all the same value.");
        }

        return engine;
    }

    public EpollEngine(int threadCount)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(threadCount, 1);
        _epollFds = new int[threadCount];
        for (var i = 0; i < threadCount; i++)
        {
            var fd = EpollInterop.EpollCreate1(EpollInterop.EpollCloexec);
            if (fd < 0)
            {
                throw new SocketException((int)EpollInterop.ToSocketError(Marshal.GetLastPInvokeError()));
            }
            _epollFds[i] = fd;
            var thread = new Thread(Run) { IsBackground = true, Name = $"Proxy epoll {i}" };
            thread.UnsafeStart(i);
        }
    }

    /// <summary>Number of epoll threads.</summary>
    public int ThreadCount => _epollFds.Length;

    /// <summary>
    /// Adds a non-blocking socket to one of the epoll instances and returns its token: epoll thread
    /// <paramref name="loop"/>'s (modulo the thread count), or with a negative value the next in turn.
    /// </summary>
    internal long Register(EpollSocket socket, SafeSocketHandle handle, int loop = -1)
    {
        long token;
        lock (_lock)
        {
            int slot;
            if (_freeCount > 0)
            {
                slot = _freeSlots[--_freeCount];
            }
            else
            {
                if (_slotsUsed == _slots.Length)
                {
                    var grown = new EpollSocket?[_slots.Length * 2];
                    Array.Copy(_slots, grown, _slots.Length);
                    Volatile.Write(ref _slots, grown);
                    Array.Resize(ref _freeSlots, grown.Length);
                }
                slot = _slotsUsed++;
            }
            // NOTE: the generation tells a reused slot's new socket from an event still in flight for the old one.
            token = ((long)++_generation << 32) | (uint)slot;
            socket.Token = token;
            _slots[slot] = socket;
        }
        var ev = stackalloc byte[16];
        *(uint*)ev = EpollInterop.EpollIn | EpollInterop.EpollOut | EpollInterop.EpollRdHup | EpollInterop.EpollEt;
        *(long*)(ev + EpollInterop.EventDataOffset) = token;
        loop = loop >= 0 ? loop % _epollFds.Length : (int)((uint)Interlocked.Increment(ref _next) % (uint)_epollFds.Length);
        socket.Loop = loop;
        var epfd = _epollFds[loop];
        if (EpollInterop.EpollCtl(epfd, EpollInterop.CtlAdd, handle, ev) != 0)
        {
            var error = Marshal.GetLastPInvokeError();
            Unregister(token);
            throw new SocketException((int)EpollInterop.ToSocketError(error));
        }
        return token;
    }

    /// <summary>
    /// Frees the socket's slot. Events still queued for it are dropped (the token's generation no longer matches);
    /// closing the descriptor removes it from epoll.
    /// </summary>
    internal void Unregister(long token)
    {
        var slot = (int)(uint)token;
        lock (_lock)
        {
            if (_slots[slot] is { } s && s.Token == token)
            {
                _slots[slot] = null;
                _freeSlots[_freeCount++] = slot;
            }
        }
    }

    private void Run(object? state)
    {
        var loop = (int)state!;
        var epfd = _epollFds[loop];
        var size = EpollInterop.EventSize;
        var offset = EpollInterop.EventDataOffset;
        var events = (byte*)NativeMemory.Alloc((nuint)(MaxEvents * size));
        var deferred = t_deferred = new DeferredWork(this, loop);
        while (true)
        {
            var count = EpollInterop.EpollWait(epfd, events, MaxEvents, -1);
            if (count < 0)
            {
                var error = Marshal.GetLastPInvokeError();
                if (error == EpollInterop.EINTR)
                {
                    continue;
                }
                // Every socket of this thread would hang: stop the process with the reason rather than limp on.
                Environment.FailFast($"epoll_wait failed with errno {error}; the sockets of this epoll thread cannot be served.");
            }
            for (var i = 0; i < count; i++)
            {
                // NOTE: read per event: a socket registered while this batch runs may be in a table grown since.
                var slots = Volatile.Read(ref _slots);
                var ev = events + (i * size);
                var token = *(long*)(ev + offset);
                var slot = (int)(uint)token;
                if ((uint)slot < (uint)slots.Length && slots[slot] is { } socket && socket.Token == token)
                {
                    // NOTE: runs the waiting loop's continuation here, on the epoll thread (as the runtime's engine
                    // does with DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS=1).
                    socket.OnEvents(*(uint*)ev);
                }
            }
            deferred.RestoreContext();
            deferred.RunAll();
        }
    }

    /// <summary>
    /// On an epoll thread: queues <paramref name="callback"/> to run on this thread once every event of its current
    /// batch was handled, and returns true. Elsewhere, or when the batch already deferred its bound: false, and nothing
    /// is queued (the caller runs it elsewhere).
    /// </summary>
    internal static bool TryDefer(Action<object?> callback, object? state) => t_deferred is { } deferred && deferred.TryAdd(callback, state);

    /// <summary>True on one of an engine's epoll threads.</summary>
    internal static bool IsEpollThread => t_deferred is not null;

    /// <summary>The calling epoll thread's index in its engine (0 to ThreadCount - 1), or -1 on any other thread.</summary>
    internal static int CurrentLoop => t_deferred is { } deferred ? deferred.Loop : -1;

    /// <summary>The calling thread's index when it is one of this engine's threads, else -1.</summary>
    internal int CurrentLoopOfThisEngine => t_deferred is { } deferred && deferred.Engine == this ? deferred.Loop : -1;

    // Owned by its epoll thread.
    private sealed class DeferredWork(EpollEngine engine, int loop)
    {
        /// <summary>The engine and the index of the thread this belongs to.</summary>
        public readonly EpollEngine Engine = engine;
        public readonly int Loop = loop;

        // NOTE: the bound on what one batch defers, items deferred by items included (a writer loop woken again while
        // it ran): past it, TryAdd refuses and the caller queues to the thread pool, so epoll_wait is called again soon
        // and no socket of this thread waits behind a long chain of work.
        private const int MaxPerBatch = 4096;
        private (Action<object?> Callback, object? State)[] _items = new (Action<object?>, object?)[64];
        private int _count;

        public bool TryAdd(Action<object?> callback, object? state)
        {
            if (_count == MaxPerBatch)
            {
                return false;
            }
            if (_count == _items.Length)
            {
                Array.Resize(ref _items, _items.Length * 2);
            }
            _items[_count++] = (callback, state);
            return true;
        }

        // The thread's own execution context: restored after an item that left another one on the thread (an AsyncLocal
        // such as Activity.Current set synchronously), as the thread pool does between its work items.
        private readonly ExecutionContext? _default = ExecutionContext.Capture();

        public void RunAll()
        {
            // NOTE: _count grows while this runs (items defer items); each runs once, in the order deferred.
            for (var i = 0; i < _count; i++)
            {
                var (callback, state) = _items[i];
                _items[i] = default;
                try
                {
                    callback(state);
                }
                catch (Exception ex)
                {
                    // The thread pool ends the process on an exception a work item leaves unhandled; so does this thread.
                    Environment.FailFast("A work item deferred on an epoll thread failed: " + ex.Message, ex);
                }
                RestoreContext();
            }
            _count = 0;
            if (_items.Length > 1024)
            {
                _items = new (Action<object?>, object?)[64]; // a rare burst's array is not kept
            }
        }

        /// <summary>Puts the thread's own execution context back if the last callback (or socket continuation) left another.</summary>
        public void RestoreContext()
        {
            if (_default is { } context && !ReferenceEquals(ExecutionContext.Capture(), context))
            {
                ExecutionContext.Restore(context);
            }
        }
    }
}
