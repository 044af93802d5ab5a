using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Threading.Tasks.Sources;

namespace Proxy.Transport.Sockets.Epoll;

// Owned by two loops: the receive side (ReadDrained, WaitReadableAsync, Receive) and the send side
// (WaitWritableAsync, Send); the engine's thread signals both, and Close may come from any thread.
/// <summary>
/// A non-blocking socket registered with an <see cref="EpollEngine"/>: calls are made at once on the caller's thread,
/// and a side waits for an event only after a call found the socket empty (receive) or full (send).
/// </summary>
internal sealed class EpollSocket
{
    private const int MaxGatherSegments = 64;

    private readonly EpollEngine _engine;
    private readonly SafeSocketHandle _handle;
    private readonly Readiness _read = new();
    private readonly Readiness _write = new();
    private MemoryHandle[]? _pins;
    private int _closed;
    // Set by the engine once the peer's end or an error was reported (RDHUP, HUP, ERR): from then on a short read does
    // not mean "wait for the next event", because none may come (see Receive).
    private volatile bool _peerDone;

    private EpollSocket(EpollEngine engine, SafeSocketHandle handle)
    {
        _engine = engine;
        _handle = handle;
    }

    /// <summary>The engine's token for this socket (registration slot and generation).</summary>
    internal long Token { get; set; }

    /// <summary>The index of the epoll thread whose instance this socket was added to.</summary>
    public int Loop { get; internal set; } = -1;

    /// <summary>
    /// True once a receive found no more bytes waiting (EAGAIN, or fewer bytes than it had room for): the next receive
    /// should first wait with <see cref="WaitReadableAsync"/>. A short read means the kernel's queue was empty at that
    /// moment, and an edge-triggered event reports every later arrival.
    /// </summary>
    public bool ReadDrained { get; private set; }

    /// <summary>
    /// Puts <paramref name="socket"/> in non-blocking mode and adds it to <paramref name="engine"/>: to epoll thread
    /// <paramref name="loop"/>'s instance, or with a negative value to the next in turn.
    /// </summary>
    public static EpollSocket Attach(Socket socket, EpollEngine engine, int loop = -1)
    {
        socket.Blocking = false;
        var epoll = new EpollSocket(engine, socket.SafeHandle);
        engine.Register(epoll, socket.SafeHandle, loop);
        return epoll;
    }

    /// <summary>
    /// Connects a new socket to <paramref name="endPoint"/> without the runtime's engine (which would add the socket
    /// to its own epoll instance too, and wake its thread for every event): a non-blocking connect, then the
    /// writable event.
    /// </summary>
    /// <param name="loop">
    /// The epoll thread to serve the socket; negative: the calling thread when it is one of the engine's (a connection
    /// opened for a request joins the thread the request runs on), else the next in turn.
    /// </param>
    public static async ValueTask<(Socket Socket, EpollSocket Epoll)> ConnectAsync(EndPoint endPoint, EpollEngine engine,
        CancellationToken cancellationToken, int loop = -1)
    {
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true, Blocking = false };
        EpollSocket? epoll = null;
        try
        {
            var pending = false;
            try
            {
                socket.Connect(endPoint);
            }
            catch (SocketException e) when (e.SocketErrorCode is SocketError.WouldBlock or SocketError.InProgress)
            {
                pending = true;
            }
            // NOTE: added after connect() started: a socket not yet connecting reports itself writable at once.
            epoll = Attach(socket, engine, loop >= 0 ? loop : engine.CurrentLoopOfThisEngine);
            if (pending)
            {
                using var registration = cancellationToken.UnsafeRegister(static s => ((EpollSocket)s!).Close(), epoll);
                while (true)
                {
                    await epoll.WaitWritableAsync().ConfigureAwait(false);
                    cancellationToken.ThrowIfCancellationRequested();
                    // NOTE: poll first: a connect that failed is writable too, and its error is read after.
                    if (socket.Poll(0, SelectMode.SelectWrite))
                    {
                        var error = (SocketError)(int)socket.GetSocketOption(SocketOptionLevel.Socket, SocketOptionName.Error)!;
                        if (error != SocketError.Success)
                        {
                            throw new SocketException((int)error);
                        }
                        break; // Connected (an event from before the handshake ended is waited out).
                    }
                }
                if (!registration.Unregister())
                {
                    // The token fired after the last check: the socket left the engine, so it is not returned.
                    throw new OperationCanceledException(cancellationToken);
                }
            }
            return (socket, epoll);
        }
        catch
        {
            epoll?.Close();
            socket.Dispose();
            throw;
        }
    }

    /// <summary>Completes when the socket may be readable (at once if an event came since the last receive).</summary>
    public ValueTask WaitReadableAsync() => _read.WaitAsync();

    /// <summary>Completes when the socket may be writable (at once if an event came since the last send).</summary>
    public ValueTask WaitWritableAsync() => _write.WaitAsync();

    /// <summary>Receives into <paramref name="buffer"/>: the bytes read, 0 at the peer's end, or -1 when none were waiting.</summary>
    /// <exception cref="SocketException">The connection failed.</exception>
    /// <exception cref="ObjectDisposedException">The socket was closed.</exception>
    public unsafe int Receive(Span<byte> buffer)
    {
        ThrowIfClosed();
        _read.Consume();
        while (true)
        {
            nint received;
            fixed (byte* p = buffer)
            {
                received = EpollInterop.Recv(_handle, p, (nuint)buffer.Length, 0);
            }
            if (received >= 0)
            {
                // NOTE: a recv that returns the last bytes also takes a FIN queued behind them (or stops short of a
                // reset), and the event that reported it is spent: after the peer's end was reported, read again
                // (0 or the error) instead of waiting.
                ReadDrained = received < buffer.Length && !_peerDone;
                return (int)received;
            }
            if (WouldBlock())
            {
                ReadDrained = true;
                return -1;
            }
        }
    }

    /// <summary>Sends what the socket takes of <paramref name="data"/>: the bytes sent, or -1 when it took none (full).</summary>
    public unsafe int Send(ReadOnlySpan<byte> data)
    {
        ThrowIfClosed();
        _write.Consume();
        while (true)
        {
            nint sent;
            fixed (byte* p = data)
            {
                sent = EpollInterop.Send(_handle, p, (nuint)data.Length, EpollInterop.MsgNoSignal);
            }
            if (sent >= 0)
            {
                return (int)sent;
            }
            if (WouldBlock())
            {
                return -1;
            }
        }
    }

    /// <summary>
    /// Sends what the socket takes of <paramref name="data"/>, 64 segments per call: the bytes sent (fewer than
    /// <paramref name="data"/> holds only when the socket is full), or -1 when it took none.
    /// </summary>
    public long Send(in ReadOnlySequence<byte> data)
    {
        if (data.IsSingleSegment)
        {
            return Send(data.FirstSpan);
        }
        long total = 0;
        var rest = data;
        while (!rest.IsEmpty)
        {
            var sent = SendBatch(rest, out var offered);
            if (sent < 0)
            {
                return total > 0 ? total : -1;
            }
            total += sent;
            if (sent < offered)
            {
                break; // Full: the caller waits for the writable event.
            }
            rest = rest.Slice(sent);
        }
        return total;
    }

    private unsafe long SendBatch(in ReadOnlySequence<byte> data, out long offered)
    {
        ThrowIfClosed();
        _write.Consume();
        var pins = _pins ??= new MemoryHandle[MaxGatherSegments];
        var iov = stackalloc EpollInterop.IoVec[MaxGatherSegments];
        var count = 0;
        offered = 0;
        try
        {
            foreach (var segment in data)
            {
                if (segment.IsEmpty)
                {
                    continue;
                }
                if (count == MaxGatherSegments)
                {
                    break;
                }
                pins[count] = segment.Pin();
                iov[count].Base = (byte*)pins[count].Pointer;
                iov[count].Length = (nuint)segment.Length;
                offered += segment.Length;
                count++;
            }
            var message = new EpollInterop.MsgHdr { Iov = iov, IovLength = (nuint)count };
            while (true)
            {
                var sent = EpollInterop.SendMsg(_handle, &message, EpollInterop.MsgNoSignal);
                if (sent >= 0)
                {
                    return sent;
                }
                if (WouldBlock())
                {
                    return -1;
                }
            }
        }
        finally
        {
            for (var i = 0; i < count; i++)
            {
                pins[i].Dispose();
            }
        }
    }

    /// <summary>Called by the engine's thread with the event's flags.</summary>
    internal void OnEvents(uint events)
    {
        if ((events & (EpollInterop.EpollRdHup | EpollInterop.EpollHup | EpollInterop.EpollErr)) != 0)
        {
            _peerDone = true; // before the signal: the woken receive must see it
        }
        if ((events & (EpollInterop.EpollIn | EpollInterop.EpollRdHup | EpollInterop.EpollHup | EpollInterop.EpollErr)) != 0)
        {
            _read.Signal();
        }
        if ((events & (EpollInterop.EpollOut | EpollInterop.EpollHup | EpollInterop.EpollErr)) != 0)
        {
            _write.Signal();
        }
    }

    /// <summary>
    /// Leaves the engine and wakes both sides for good (their next call throws <see cref="ObjectDisposedException"/>).
    /// Needed when the socket is disposed: closing the descriptor removes it from epoll, so no event would wake a waiter.
    /// </summary>
    public void Close()
    {
        if (Interlocked.Exchange(ref _closed, 1) == 0)
        {
            _engine.Unregister(Token);
        }
        _read.Close();
        _write.Close();
    }

    // After a call that failed: true when the socket would block (EAGAIN), false to call again (EINTR); otherwise
    // the connection failed.
    private static bool WouldBlock()
    {
        var error = Marshal.GetLastPInvokeError();
        if (error == EpollInterop.EAGAIN)
        {
            return true;
        }
        return error == EpollInterop.EINTR ? false : throw new SocketException((int)EpollInterop.ToSocketError(error));
    }

    // NOTE: a closed socket's waits complete at once; a call must then fail rather than find EAGAIN and wait again.
    private void ThrowIfClosed() => ObjectDisposedException.ThrowIf(Volatile.Read(ref _closed) != 0, this);

    // One direction's readiness: Idle (nothing known since the owner's last call), Ready (an event came since),
    // Waiting (the owner awaits the next event), Closed (every wait completes at once).
    private sealed class Readiness : IValueTaskSource
    {
        private const int Idle = 0, Ready = 1, Waiting = 2, Closed = 3;
        private int _state;
        // NOTE: continuations run on the signalling thread (RunContinuationsAsynchronously is false): the engine's.
        private ManualResetValueTaskSourceCore<bool> _core;

        /// <summary>The owner is about to call the socket: an event noted so far is covered by that call.</summary>
        public void Consume()
        {
            if (Volatile.Read(ref _state) == Ready)
            {
                Interlocked.CompareExchange(ref _state, Idle, Ready);
            }
        }

        public ValueTask WaitAsync()
        {
            var state = Interlocked.CompareExchange(ref _state, Waiting, Idle);
            if (state == Idle)
            {
                return new ValueTask(this, _core.Version);
            }
            if (state == Ready)
            {
                Interlocked.CompareExchange(ref _state, Idle, Ready);
            }
            return default;
        }

        public void Signal()
        {
            while (true)
            {
                switch (Volatile.Read(ref _state))
                {
                    case Ready:
                    case Closed:
                        return;
                    case Idle:
                        if (Interlocked.CompareExchange(ref _state, Ready, Idle) == Idle)
                        {
                            return;
                        }
                        break;
                    default: // Waiting
                        if (Interlocked.CompareExchange(ref _state, Idle, Waiting) == Waiting)
                        {
                            _core.SetResult(true);
                            return;
                        }
                        break;
                }
            }
        }

        public void Close()
        {
            if (Interlocked.Exchange(ref _state, Closed) == Waiting)
            {
                // NOTE: on the thread pool, not inline: Close comes from Abort, cancellation callbacks and timers,
                // whose callers must not run the loop's ending (and the protocol's reader after it) on their stack.
                ThreadPool.UnsafeQueueUserWorkItem(static r => r._core.SetResult(true), this, preferLocal: false);
            }
        }

        public void GetResult(short token)
        {
            _core.GetResult(token);
            _core.Reset();
        }

        public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

        public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
            _core.OnCompleted(continuation, state, token, flags);
    }
}
