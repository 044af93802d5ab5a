namespace Proxy.Protocols;

// Immutable; shared.
/// <summary>
/// Where a connection engine runs the work it does not run on the calling thread: a frame-writer loop a producer woke,
/// a new stream's handler when the handler may run on the event loop (<see cref="IEventLoopRequestHandler"/>), a
/// response head's continuation. <see cref="ThreadPool"/> is the default. A host whose transport runs one event loop
/// per thread (Proxy.Transport's epoll engine) passes one built on its deferral: called on a loop thread, the work runs
/// there after the loop's current batch of socket events (no other thread wakes, and the writes the batch causes leave
/// together); called anywhere else, it goes to the thread pool. It is also a <see cref="PipeScheduler"/>, for pipes
/// whose reader may continue there.
/// </summary>
public sealed class WorkScheduler : PipeScheduler
{
    private static readonly Action<object?> s_execute = static item => ((IThreadPoolWorkItem)item!).Execute();
    private readonly Func<Action<object?>, object?, bool>? _tryDefer;
    private readonly Func<bool>? _isOnEventLoop;

    /// <param name="tryDefer">
    /// Queues the callback to run later on the calling thread's event loop and returns true; returns false (queueing
    /// nothing) off an event loop. It never runs the callback before it returns.
    /// </param>
    /// <param name="isOnEventLoop">True on one of the event loops' threads.</param>
    public WorkScheduler(Func<Action<object?>, object?, bool> tryDefer, Func<bool> isOnEventLoop)
    {
        _tryDefer = tryDefer ?? throw new ArgumentNullException(nameof(tryDefer));
        _isOnEventLoop = isOnEventLoop ?? throw new ArgumentNullException(nameof(isOnEventLoop));
    }

    private WorkScheduler() { }

    /// <summary>The thread pool (not preferring the calling thread's local queue).</summary>
    public static new WorkScheduler ThreadPool { get; } = new();

    /// <summary>True when this scheduler may run work on an event loop (false for <see cref="ThreadPool"/>).</summary>
    public bool HasEventLoop => _tryDefer is not null;

    /// <summary>True when the calling thread is one of this scheduler's event loops: work that may wait (a file read) leaves it first.</summary>
    public bool IsOnEventLoop => _isOnEventLoop?.Invoke() == true;

    /// <summary>Runs the item later: on this thread's event loop after its batch, else on the thread pool.</summary>
    public void Schedule(IThreadPoolWorkItem item)
    {
        if (!TryDefer(item))
        {
            System.Threading.ThreadPool.UnsafeQueueUserWorkItem(item, preferLocal: false);
        }
    }

    /// <summary>On an event loop: queues the item to its batch's end and returns true. Elsewhere: false, nothing queued.</summary>
    public bool TryDefer(IThreadPoolWorkItem item) => _tryDefer is { } defer && defer(s_execute, item);

    public override void Schedule(Action<object?> action, object? state)
    {
        if (_tryDefer is not { } defer || !defer(action, state))
        {
            System.Threading.ThreadPool.UnsafeQueueUserWorkItem(action, state, preferLocal: false);
        }
    }
}
