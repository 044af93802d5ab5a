namespace Proxy.Transport.Sockets;

/// <summary>
/// A connection's place on our epoll engine: the index of the epoll thread serving its socket (the thread its reads
/// continue on). A connection feature of the listener's connections on <see cref="SocketEngine.Epoll"/>.
/// </summary>
public interface IEventLoopFeature
{
    /// <summary>0 to the engine's thread count - 1 (see <see cref="EventLoop.CurrentIndex"/>).</summary>
    int Loop { get; }
}
