using Proxy.Transport.Sockets;

namespace Proxy.Server.Internal;

// Stateless; the scheduler is shared by every connection of the process.
/// <summary>
/// The engines' <see cref="WorkScheduler"/> for connections on our epoll engine with inline scheduling, where the read
/// loops run on the epoll threads: work they cause there (a writer loop to wake, a direct-path stream, a direct-path
/// response head) runs on the same thread after its batch of events (<see cref="EventLoop.TryDefer"/>). Anywhere else,
/// the thread pool.
/// </summary>
internal static class EventLoopScheduling
{
    private static readonly WorkScheduler s_eventLoop = new(EventLoop.TryDefer, static () => EventLoop.IsCurrentThread);

    public static WorkScheduler For(SocketTransportOptions sockets) =>
        sockets.Engine == SocketEngine.Epoll && sockets.InlineScheduling ? s_eventLoop : WorkScheduler.ThreadPool;
}
