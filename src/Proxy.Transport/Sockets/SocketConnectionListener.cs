using System.Net.Sockets;
using Proxy.Transport.Sockets.Epoll;

namespace Proxy.Transport.Sockets;

// Owned by its accept loop (AcceptAsync is called by one loop at a time); Unbind/Dispose may come from any thread.
/// <summary>A bound TCP listen socket producing <see cref="ConnectionContext"/>s whose transport is pumped to the socket.</summary>
public sealed class SocketConnectionListener : IConnectionListener
{
    private readonly Socket _listenSocket;
    private readonly SocketTransportOptions _options;
    private readonly ISocketIoMetrics? _io;
    private readonly EpollEngine? _epoll;

    private SocketConnectionListener(Socket listenSocket, SocketTransportOptions options, ISocketIoMetrics? io, EpollEngine? epoll)
    {
        _listenSocket = listenSocket;
        _options = options;
        _io = io;
        _epoll = epoll;
        EndPoint = listenSocket.LocalEndPoint!;
    }

    /// <summary>The bound endpoint, with the real port when port 0 was asked for.</summary>
    public EndPoint EndPoint { get; }

    /// <summary>Binds and starts listening. Throws <see cref="AddressInUseException"/> when the port is taken.</summary>
    /// <param name="io">Where the accepted connections report the bytes they move, or null.</param>
    public static SocketConnectionListener Bind(IPEndPoint endPoint, SocketTransportOptions? options = null, ISocketIoMetrics? io = null)
    {
        options ??= new SocketTransportOptions();
        var epoll = EngineFor(options);
        var socket = new Socket(endPoint.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        try
        {
            if (endPoint.Address.Equals(IPAddress.IPv6Any))
            {
                socket.DualMode = true; // [::] accepts IPv4 too, as Kestrel does.
            }
            socket.Bind(endPoint);
            socket.Listen(options.Backlog);
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.AddressAlreadyInUse)
        {
            socket.Dispose();
            throw new AddressInUseException(e.Message, e);
        }
        catch
        {
            socket.Dispose();
            throw;
        }
        return new SocketConnectionListener(socket, options, io, epoll);
    }

    private static int ValidEpollThreads(SocketTransportOptions options) => options.EpollThreads is >= 0 and <= SocketTransportOptions.MaxEpollThreads
        ? options.EpollThreads
        : throw new ArgumentOutOfRangeException(nameof(options), options.EpollThreads,
            $"Sockets:EpollThreads is {options.EpollThreads}: use 0 (one thread per core) or a number of threads up to {SocketTransportOptions.MaxEpollThreads}.");

    /// <summary>The epoll engine <paramref name="options"/> ask for, or null for the runtime's.</summary>
    /// <exception cref="PlatformNotSupportedException">Epoll was asked for off Linux.</exception>
    internal static EpollEngine? EngineFor(SocketTransportOptions options) => options.Engine switch
    {
        SocketEngine.Epoll => EpollEngine.GetShared(ValidEpollThreads(options)) ?? throw new PlatformNotSupportedException(
            $"Sockets:Engine is {SocketEngine.Epoll}, which needs Linux; use {SocketEngine.Runtime} on {System.Runtime.InteropServices.RuntimeInformation.OSDescription}."),
        _ => null,
    };

    /// <summary>
    /// The process (EMFILE) or the system (ENFILE) is out of file descriptors, or the kernel out of buffers: AcceptAsync
    /// throws these instead of retrying at once, which spun a core while the connection stayed in the queue. The caller
    /// waits before it accepts again.
    /// </summary>
    public static bool IsOutOfResources(SocketException e)
        => e.SocketErrorCode is SocketError.TooManyOpenSockets or SocketError.NoBufferSpaceAvailable;

    /// <summary>
    /// Waits for the next connection; null once the listener is unbound. Throws a <see cref="SocketException"/> for which
    /// <see cref="IsOutOfResources"/> holds; other accept failures (a peer that left first) are skipped.
    /// </summary>
    public async ValueTask<ConnectionContext?> AcceptAsync(CancellationToken cancellationToken = default)
    {
        while (true)
        {
            Socket accepted;
            try
            {
                accepted = await _listenSocket.AcceptAsync(cancellationToken).ConfigureAwait(false);
            }
            catch (ObjectDisposedException)
            {
                return null;
            }
            catch (SocketException e) when (e.SocketErrorCode == SocketError.OperationAborted)
            {
                return null;
            }
            catch (SocketException e) when (!IsOutOfResources(e))
            {
                continue; // The peer gave up before we accepted (ECONNRESET): keep accepting.
            }

            accepted.NoDelay = _options.NoDelay;
            EpollSocket? epoll = null;
            if (_epoll is not null)
            {
                try
                {
                    epoll = EpollSocket.Attach(accepted, _epoll);
                }
                catch (SocketException)
                {
                    accepted.Dispose();
                    continue;
                }
            }
            var connection = new SocketConnection(accepted, _options, _io, epoll);
            connection.Start();
            return connection;
        }
    }

    public ValueTask UnbindAsync(CancellationToken cancellationToken = default)
    {
        _listenSocket.Dispose();
        return default;
    }

    public ValueTask DisposeAsync()
    {
        _listenSocket.Dispose();
        return default;
    }
}
