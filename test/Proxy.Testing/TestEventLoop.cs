using System.Collections.Concurrent;
using Proxy.Protocols;

namespace Proxy.Testing;

/// <summary>
/// A stand-in for an event-loop thread, for engine tests: one dedicated thread runs, in order, the work a
/// <see cref="Scheduler"/> defers to it, from any thread. It records what ran there, so a test can tell which work the
/// engine put on the loop and which it kept off it.
/// </summary>
public sealed class TestEventLoop : IDisposable
{
    private readonly BlockingCollection<(Action<object?> Callback, object? State)> _work = new();
    private readonly Thread _thread;
    private int _ran;

    public TestEventLoop()
    {
        Scheduler = new WorkScheduler((callback, state) =>
        {
            _work.Add((callback, state));
            return true;
        });
        _thread = new Thread(Run) { IsBackground = true, Name = "Test event loop" };
        _thread.Start();
    }

    public WorkScheduler Scheduler { get; }

    /// <summary>True on the loop's thread.</summary>
    public bool IsCurrentThread => Thread.CurrentThread == _thread;

    /// <summary>How many deferred items ran so far.</summary>
    public int Ran => Volatile.Read(ref _ran);

    /// <summary>Type names of the work items (the states of the deferred callbacks) that ran, in order.</summary>
    public ConcurrentQueue<string> RanStates { get; } = new();

    private void Run()
    {
        foreach (var (callback, state) in _work.GetConsumingEnumerable())
        {
            RanStates.Enqueue(state?.GetType().Name ?? "null");
            callback(state);
            Interlocked.Increment(ref _ran);
        }
    }

    public void Dispose() => _work.CompleteAdding();
}
