using System.Threading.Tasks.Sources;

namespace Proxy.Protocols.Http2;

// Owned by the frame-writer loop (WaitAsync); Signal is called by any thread.
/// <summary>
/// How producers wake the frame-writer loop after they queued a message to it (instead of the channel's own wait, whose
/// continuation always goes to the thread pool). The loop waits only after it found its queue empty; a signal that comes
/// between that check and the wait makes the wait return at once. The woken loop runs where the connection's
/// <see cref="WorkScheduler"/> puts it: signalled on an event loop, after that loop's batch of events, so the output
/// of every stream the batch touched leaves in one write and no other thread wakes; else on the thread pool.
/// </summary>
internal sealed class WriterWake : IValueTaskSource, IThreadPoolWorkItem
{
    private const int Running = 0, Waiting = 1, Signaled = 2;
    private readonly WorkScheduler _scheduler;
    // NOTE: the continuation runs where Execute runs: the scheduler's thread.
    private ManualResetValueTaskSourceCore<bool> _core;
    private int _state;

    public WriterWake(WorkScheduler scheduler) => _scheduler = scheduler;

    /// <summary>Where the woken loop runs.</summary>
    public WorkScheduler Scheduler => _scheduler;

    /// <summary>Loop: waits for the next signal (one that came since the loop last woke completes this at once).</summary>
    public ValueTask WaitAsync()
    {
        _core.Reset();
        if (Interlocked.CompareExchange(ref _state, Waiting, Running) == Running)
        {
            return new ValueTask(this, _core.Version);
        }
        Volatile.Write(ref _state, Running); // Signaled: only the loop leaves that state
        return default;
    }

    /// <summary>
    /// Loop: lets the work queued to the scheduler before this (on an event loop: the rest of its batch) run first, then
    /// resumes; a wait that a signal ends, signalled at once. When a signal already came since the loop woke, it returns
    /// at once instead (the loop has messages to read).
    /// </summary>
    /// <remarks>
    /// NOTE: a version that always defers (taking the pending signal) made lent last chunks leave with their END_STREAM,
    /// but cost GET 100 KB over TLS 7% more CPU (benchmarks/README.md, session 22); the relay copies last chunks instead.
    /// </remarks>
    public ValueTask YieldAsync()
    {
        var wait = WaitAsync();
        Signal();
        return wait;
    }

    /// <summary>Any thread, after queueing a message (or completing the queue).</summary>
    public void Signal()
    {
        while (true)
        {
            switch (Volatile.Read(ref _state))
            {
                case Signaled:
                    return;
                case Running:
                    if (Interlocked.CompareExchange(ref _state, Signaled, Running) == Running)
                    {
                        return;
                    }
                    break;
                default: // Waiting
                    if (Interlocked.CompareExchange(ref _state, Running, Waiting) == Waiting)
                    {
                        _scheduler.Schedule(this);
                        return;
                    }
                    break;
            }
        }
    }

    void IThreadPoolWorkItem.Execute() => _core.SetResult(true);

    public void GetResult(short token) => _core.GetResult(token);

    public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

    public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _core.OnCompleted(continuation, state, token, flags);
}
