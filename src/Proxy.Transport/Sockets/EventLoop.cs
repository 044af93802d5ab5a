namespace Proxy.Transport.Sockets;

// Stateless (the deferred work is per epoll thread).
/// <summary>
/// Our epoll engine's threads as event loops (<see cref="SocketEngine.Epoll"/> with
/// <see cref="SocketTransportOptions.InlineScheduling"/>: a socket's receive loop and the protocol's read loop run on
/// them). Work a loop causes there (a writer loop to wake, a stream's own handler, a response head's continuation) can
/// be deferred to the end of the thread's current batch of socket events: it then runs on the same thread, without
/// waking another, and the writes the whole batch causes leave together.
/// </summary>
public static class EventLoop
{
    /// <summary>
    /// On an epoll thread: queues <paramref name="callback"/> to run on it after its current batch of events and returns
    /// true. Anywhere else: false, with nothing queued. Deferred work must not block: every socket of the thread waits
    /// for it.
    /// </summary>
    public static bool TryDefer(Action<object?> callback, object? state)
    {
        ArgumentNullException.ThrowIfNull(callback);
        return Epoll.EpollEngine.TryDefer(callback, state);
    }

    /// <summary>True on an epoll engine's thread.</summary>
    public static bool IsCurrentThread => Epoll.EpollEngine.IsEpollThread;

    /// <summary>
    /// The calling epoll thread's index in its engine, or -1 on any other thread. A backend connection opened on an epoll
    /// thread joins that thread (<see cref="Client.BackendTransport.Loop"/>, <see cref="IEventLoopFeature"/>), so a pool that hands a request the connections of
    /// its own thread keeps the request's work, front and back, on one core.
    /// </summary>
    public static int CurrentIndex => Epoll.EpollEngine.CurrentLoop;

    /// <summary>
    /// A pipe scheduler for a reader that is our own non-blocking code (a TLS connection's output pump): woken on an epoll
    /// thread, it runs after that thread's batch; woken elsewhere, on the thread pool.
    /// </summary>
    public static PipeScheduler PipeScheduler { get; } = new DeferringPipeScheduler();

    private sealed class DeferringPipeScheduler : PipeScheduler
    {
        public override void Schedule(Action<object?> action, object? state)
        {
            if (!Epoll.EpollEngine.TryDefer(action, state))
            {
                System.Threading.ThreadPool.UnsafeQueueUserWorkItem(action, state, preferLocal: false);
            }
        }
    }
}
