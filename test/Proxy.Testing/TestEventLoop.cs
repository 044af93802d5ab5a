using System.Collections.Concurrent;
using System.IO.Pipelines;
using Proxy.Protocols;

namespace Proxy.Testing;

/// <summary>
/// A stand-in for one event-loop thread, for engine tests, modelled on the epoll engine: a transport pipe whose reader
/// scheduler is <see cref="PipeScheduler"/> resumes its reader (a connection's read loop) on the loop's thread, and
/// <see cref="Scheduler"/> defers work to the end of the loop's current item only when called on that thread (elsewhere
/// it refuses, and the engine uses the thread pool). It records what ran there, so a test can tell which work the engine
/// put on the loop and which it kept off it.
/// </summary>
public sealed class TestEventLoop : IDisposable
{
    private readonly BlockingCollection<(Action<object?> Callback, object? State)> _work = new();
    private readonly Thread _thread;

    public TestEventLoop()
    {
        Scheduler = new WorkScheduler((callback, state) => IsCurrentThread && TryPost(callback, state), () => IsCurrentThread);
        PipeScheduler = new LoopPipeScheduler(this);
        _thread = new Thread(Run) { IsBackground = true, Name = "Test event loop" };
        _thread.Start();
    }

    /// <summary>The engines' scheduler: defers on the loop's thread, refuses elsewhere.</summary>
    public WorkScheduler Scheduler { get; }

    /// <summary>For a transport pipe: its reader resumes on the loop (the thread pool once the loop is disposed).</summary>
    public PipeScheduler PipeScheduler { get; }

    /// <summary>True on the loop's thread.</summary>
    public bool IsCurrentThread => Thread.CurrentThread == _thread;

    /// <summary>Type names of the work items (the states of the callbacks) that ran, in order.</summary>
    public ConcurrentQueue<string> RanStates { get; } = new();

    /// <summary>Runs <paramref name="start"/> on the loop (a connection's first read starts there) and returns what it returned.</summary>
    public Task<T> RunAsync<T>(Func<T> start)
    {
        var result = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        if (!TryPost(_ =>
            {
                try
                {
                    result.TrySetResult(start());
                }
                catch (Exception ex)
                {
                    result.TrySetException(ex);
                }
            }, null))
        {
            result.TrySetException(new ObjectDisposedException(nameof(TestEventLoop)));
        }
        return result.Task;
    }

    private bool TryPost(Action<object?> callback, object? state)
    {
        try
        {
            _work.Add((callback, state));
            return true;
        }
        catch (InvalidOperationException)
        {
            return false; // disposed: adding completed
        }
    }

    private void Run()
    {
        foreach (var (callback, state) in _work.GetConsumingEnumerable())
        {
            RanStates.Enqueue(state?.GetType().Name ?? "null");
            callback(state);
        }
    }

    public void Dispose() => _work.CompleteAdding();

    private sealed class LoopPipeScheduler(TestEventLoop loop) : PipeScheduler
    {
        public override void Schedule(Action<object?> action, object? state)
        {
            if (!loop.TryPost(action, state))
            {
                System.Threading.ThreadPool.UnsafeQueueUserWorkItem(action, state, preferLocal: false);
            }
        }
    }
}
