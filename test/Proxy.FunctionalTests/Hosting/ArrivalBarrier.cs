using System.Collections.Concurrent;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// Holds requests of one group until <c>expected</c> of them are inside the app at the same time.
/// A request can only complete if that many streams were truly in flight together, so a server that
/// serialises streams fails (after <see cref="Timeout"/>) instead of passing slowly.
/// </summary>
// Shared by the request handlers of one test host; every member is thread-safe.
public sealed class ArrivalBarrier
{
    private readonly ConcurrentDictionary<string, Group> _groups = new();

    public static readonly TimeSpan Timeout = TimeSpan.FromSeconds(15);

    /// <summary>Waits until <paramref name="expected"/> requests of <paramref name="group"/> arrived; returns the count seen.</summary>
    public async Task<int> ArriveAsync(string group, int expected, CancellationToken cancellationToken)
    {
        var state = _groups.GetOrAdd(group, _ => new Group());
        var arrived = Interlocked.Increment(ref state.Arrived);
        if (arrived >= expected)
        {
            state.AllArrived.TrySetResult();
        }

        await state.AllArrived.Task.WaitAsync(Timeout, cancellationToken);
        return Volatile.Read(ref state.Arrived);
    }

    private sealed class Group
    {
        public int Arrived;
        public readonly TaskCompletionSource AllArrived = new(TaskCreationOptions.RunContinuationsAsynchronously);
    }
}
