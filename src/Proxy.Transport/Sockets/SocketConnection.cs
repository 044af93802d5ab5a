using System.Net.Sockets;
using System.Runtime.InteropServices;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Transport.Sockets.Epoll;

namespace Proxy.Transport.Sockets;

// Owned by two loops: the receive loop owns the socket's receive side and the input pipe's
// writer; the send loop owns the socket's send side and the output pipe's reader. The app side
// (Transport) belongs to the connection middleware/protocol above.
/// <summary>A TCP connection whose <see cref="ConnectionContext.Transport"/> is a pair of pipes pumped to and from a socket.</summary>
internal sealed class SocketConnection : ConnectionContext, IConnectionIdFeature, IConnectionEndPointFeature,
    IConnectionLifetimeFeature, IConnectionItemsFeature, IConnectionTransportFeature, IEventLoopFeature
{
    private static long s_lastId;

    private readonly Socket _socket;
    private readonly Pipe _input;
    private readonly Pipe _output;
    private readonly int _minReceive;
    private readonly bool _waitForData;
    private readonly CancellationTokenSource _closedCts = new();
    private readonly FeatureCollection _features = new();
    private Task _processing = Task.CompletedTask;
    private volatile ConnectionAbortedException? _abortReason;
    private int _closedSignaled;
    private readonly ISocketIoMetrics? _io;
    // The socket's I/O through our epoll engine, or null for the runtime's Socket methods.
    private readonly EpollSocket? _epoll;

    /// <param name="epoll">The socket attached to an epoll engine (<see cref="SocketEngine.Epoll"/>), or null.</param>
    public SocketConnection(Socket socket, SocketTransportOptions options, ISocketIoMetrics? io = null, EpollSocket? epoll = null)
    {
        _socket = socket;
        _io = io;
        _epoll = epoll;
        _minReceive = options.MinReceiveBufferSize;
        _waitForData = options.WaitForDataBeforeAllocatingBuffer;
        var readerScheduler = options.InlineScheduling ? PipeScheduler.Inline : PipeScheduler.ThreadPool;
        _input = new Pipe(new PipeOptions(
            pool: options.InputMemoryPool,
            readerScheduler: readerScheduler,
            pauseWriterThreshold: options.MaxReadBufferSize,
            resumeWriterThreshold: options.MaxReadBufferSize / 2,
            minimumSegmentSize: options.MinReceiveBufferSize,
            useSynchronizationContext: false));
        _output = new Pipe(new PipeOptions(
            pool: options.OutputMemoryPool,
            // NOTE: on our epoll engine a flush made on an epoll thread sends after that thread's batch of events, not
            // at once (EndOfBatchScheduler); elsewhere the send runs on the flushing thread as before.
            readerScheduler: epoll is not null && options.InlineScheduling ? EndOfBatchScheduler.Instance : readerScheduler,
            pauseWriterThreshold: options.MaxWriteBufferSize,
            resumeWriterThreshold: options.MaxWriteBufferSize / 2,
            useSynchronizationContext: false));

        ConnectionId = "c" + Interlocked.Increment(ref s_lastId).ToString("x8", System.Globalization.CultureInfo.InvariantCulture);
        LocalEndPoint = socket.LocalEndPoint;
        RemoteEndPoint = socket.RemoteEndPoint;
        Transport = new DuplexPipe(_input.Reader, _output.Writer);
        Items = new ConnectionItems();
        ConnectionClosed = _closedCts.Token;

        _features.Set<IConnectionIdFeature>(this);
        _features.Set<IConnectionEndPointFeature>(this);
        _features.Set<IConnectionLifetimeFeature>(this);
        _features.Set<IConnectionItemsFeature>(this);
        _features.Set<IConnectionTransportFeature>(this);
        if (epoll is not null)
        {
            _features.Set<IEventLoopFeature>(this);
        }
    }

    /// <summary>The epoll thread this connection's socket is served by (<see cref="EventLoop.CurrentIndex"/>), or -1 off our engine.</summary>
    public int Loop => _epoll?.Loop ?? -1;

    public override string ConnectionId { get; set; }
    public override IFeatureCollection Features => _features;
    public override IDictionary<object, object?> Items { get; set; }
    public override IDuplexPipe Transport { get; set; }
    public override CancellationToken ConnectionClosed { get; set; }
    public override EndPoint? LocalEndPoint { get; set; }
    public override EndPoint? RemoteEndPoint { get; set; }

    public void Start() => _processing = Task.WhenAll(ReceiveLoopAsync(), SendLoopAsync());

    public override void Abort(ConnectionAbortedException abortReason)
    {
        _abortReason ??= abortReason;
        // Wake the send loop; closing the socket ends the receive loop.
        _output.Reader.CancelPendingRead();
        CloseSocket();
    }

    public override async ValueTask DisposeAsync()
    {
        _input.Reader.Complete();
        _output.Writer.Complete();
        await _processing.ConfigureAwait(false);
        _socket.Dispose();
        _closedCts.Dispose();
    }

    private async Task ReceiveLoopAsync()
    {
        Exception? error = null;
        var writer = _input.Writer;
        var continuing = false; // the last batch stopped at MaxReceiveBatch, the socket not drained
        try
        {
            while (true)
            {
                int received;
                if (_epoll is { } epoll)
                {
                    // Waits for an event only when the last receive emptied the socket, before taking a buffer (what
                    // WaitForDataBeforeAllocatingBuffer does on the runtime's engine; always so here). After a spurious
                    // event (received < 0 below) the block already taken stays with the pipe while the loop waits.
                    if (epoll.ReadDrained)
                    {
                        await epoll.WaitReadableAsync().ConfigureAwait(false);
                    }
                    // After a batch that stopped at its bound with bytes still waiting, the next one starts with a
                    // receive of the whole bound (a large block of InputDefault) rather than one block.
                    received = continuing ? ReceiveUpTo(epoll, writer, MaxReceiveBatch) : epoll.Receive(writer.GetMemory(_minReceive).Span);
                    continuing = false;
                    if (received < 0)
                    {
                        continue; // Nothing after all (an event for bytes an earlier receive took).
                    }
                    if (received > 0 && !epoll.ReadDrained)
                    {
                        // The buffer filled, so more may be waiting: take it before the protocol runs (see ReceiveBatch).
                        writer.Advance(received);
                        _io?.Received(received);
                        var (finished, failure) = ReceiveBatch(epoll, writer, received);
                        var batchFlush = await writer.FlushAsync().ConfigureAwait(false);
                        if (failure is not null)
                        {
                            // What came before the failure went to the protocol first, as it would have read by read.
                            System.Runtime.ExceptionServices.ExceptionDispatchInfo.Throw(failure);
                        }
                        if (finished || batchFlush.IsCompleted || batchFlush.IsCanceled)
                        {
                            break; // FIN from the peer, or the protocol stopped reading.
                        }
                        continuing = !epoll.ReadDrained;
                        continue;
                    }
                }
                else
                {
                    if (_waitForData)
                    {
                        // Completes when data (or FIN) is there; the buffer is taken only then.
                        await _socket.ReceiveAsync(Memory<byte>.Empty, SocketFlags.None).ConfigureAwait(false);
                    }
                    received = await _socket.ReceiveAsync(writer.GetMemory(_minReceive), SocketFlags.None).ConfigureAwait(false);
                }
                if (received == 0)
                {
                    break; // FIN from the peer.
                }
                writer.Advance(received);
                _io?.Received(received);
                var flush = await writer.FlushAsync().ConfigureAwait(false);
                if (flush.IsCompleted || flush.IsCanceled)
                {
                    break; // The protocol stopped reading.
                }
            }
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            // Reset by the peer, or our own Abort/close: the protocol sees an aborted connection.
            error = (Exception?)_abortReason ?? new ConnectionResetException(e.Message, e);
        }
        finally
        {
            // After Abort the socket may report a clean end (shutdown makes recv return 0): still an abort.
            error ??= _abortReason;
            writer.Complete(error);
            SignalClosed();
        }
    }

    /// <summary>Most bytes the receive loop takes from the socket before the protocol reads them (see <see cref="ReceiveBatch"/>).</summary>
    internal const int MaxReceiveBatch = 64 * 1024;

    /// <summary>
    /// After a receive that filled its buffer: receives again, without waiting, while the socket has more and the batch
    /// is under <see cref="MaxReceiveBatch"/>. Returns whether the peer's end (FIN) was met, and the failure that
    /// stopped it, if any (thrown by the caller after the batch was flushed).
    /// </summary>
    /// <remarks>
    /// NOTE: a 100 KB response arrived in 7 receives of up to 16 KiB (a block), and each went through the protocol on
    /// its own: the relay copied and sent 7 pieces, and woke its client for most of them. Read in batches, the protocol
    /// runs once per 64 KiB (a third of the relay's turns, sends and wakeups), and with the rest of a batch taken in one
    /// receive the 7 receives are 3.
    /// </remarks>
    private (bool Finished, Exception? Failure) ReceiveBatch(EpollSocket epoll, PipeWriter writer, int batched)
    {
        try
        {
            while (!epoll.ReadDrained && batched < MaxReceiveBatch)
            {
                // The rest of the batch in one receive where the pool has a block that large (InputDefault's 64 KiB).
                var received = ReceiveUpTo(epoll, writer, Math.Max(_minReceive, MaxReceiveBatch - batched));
                if (received <= 0)
                {
                    return (received == 0, null); // 0: FIN; -1: the socket is empty after all
                }
                writer.Advance(received);
                _io?.Received(received);
                batched += received;
            }
            return (false, null);
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            return (false, e);
        }
    }

    /// <summary>One receive of at most <paramref name="wanted"/> bytes, into a block of at least that size when the pool has one.</summary>
    private static int ReceiveUpTo(EpollSocket epoll, PipeWriter writer, int wanted)
    {
        var span = writer.GetMemory(wanted).Span;
        return epoll.Receive(span.Length > wanted ? span[..wanted] : span);
    }

    private async Task SendLoopAsync()
    {
        Exception? error = null;
        var reader = _output.Reader;
        List<ArraySegment<byte>>? gather = null;
        try
        {
            while (true)
            {
                var result = await reader.ReadAsync().ConfigureAwait(false);
                if (result.IsCanceled)
                {
                    break; // Abort.
                }
                var buffer = result.Buffer;
                if (!buffer.IsEmpty)
                {
                    if (_epoll is { } epoll)
                    {
                        await SendEpollAsync(epoll, buffer).ConfigureAwait(false);
                    }
                    else if (buffer.IsSingleSegment)
                    {
                        await SendAllAsync(buffer.First).ConfigureAwait(false);
                    }
                    else
                    {
                        gather ??= new List<ArraySegment<byte>>(16);
                        await SendGatherAsync(buffer, gather).ConfigureAwait(false);
                    }
                }
                reader.AdvanceTo(buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            error = (Exception?)_abortReason ?? new ConnectionResetException(e.Message, e);
        }
        finally
        {
            error ??= _abortReason;
            reader.Complete(error);
            // The protocol is done writing (or the socket broke): close, which also ends a
            // receive loop still waiting for bytes nobody will read.
            CloseSocket();
        }
    }

    private async ValueTask SendEpollAsync(EpollSocket epoll, ReadOnlySequence<byte> data)
    {
        while (true)
        {
            var sent = epoll.Send(data);
            if (sent > 0)
            {
                _io?.Sent(sent);
                data = data.Slice(sent);
                if (data.IsEmpty)
                {
                    return;
                }
            }
            // NOTE: wait only now: Send returns less than it was given only when the socket is full (EAGAIN, or a short
            // send), and an edge-triggered writable event comes only after the kernel found it full.
            await epoll.WaitWritableAsync().ConfigureAwait(false);
        }
    }

    private async ValueTask SendAllAsync(ReadOnlyMemory<byte> data)
    {
        while (!data.IsEmpty)
        {
            var sent = await _socket.SendAsync(data, SocketFlags.None).ConfigureAwait(false);
            _io?.Sent(sent);
            data = data[sent..];
        }
    }

    private async ValueTask SendGatherAsync(ReadOnlySequence<byte> buffer, List<ArraySegment<byte>> gather)
    {
        gather.Clear();
        foreach (var segment in buffer)
        {
            if (!MemoryMarshal.TryGetArray(segment, out var array))
            {
                // Not array-backed (a custom pool): fall back to one send per segment.
                foreach (var s in buffer)
                {
                    await SendAllAsync(s).ConfigureAwait(false);
                }
                return;
            }
            gather.Add(array);
        }
        var total = buffer.Length;
        var sent = (long)await _socket.SendAsync(gather, SocketFlags.None).ConfigureAwait(false);
        _io?.Sent(sent);
        if (sent < total)
        {
            // Stream sockets normally send everything; finish a short send segment by segment.
            foreach (var s in buffer.Slice(sent))
            {
                await SendAllAsync(s).ConfigureAwait(false);
            }
        }
    }

    /// <summary>
    /// The output pipe's reader scheduler on our epoll engine: a send woken on an epoll thread runs after the thread's
    /// current batch of socket events, with every other send the batch caused; anywhere else (the thread pool, an app's
    /// thread) it runs at once on the flushing thread, as <see cref="PipeScheduler.Inline"/>.
    /// </summary>
    /// <remarks>
    /// NOTE: sent at once, each request a batch relayed to a backend woke the backend while the loop went on with the
    /// next event, and each response woke its client: the peers took one wakeup per message and our sends paid for them
    /// (the loopback's receive path and the wakeup run in the sender's system time). Sent together after the batch,
    /// a peer still running from the first send takes the rest without another wakeup. Interleaved against sending at
    /// once (direct path, 3 pairs each): CPU per request GET 1 KB h1 -7 to -17%, POST 1 KB h1 -11 to -21%, GET 1 KB h1
    /// over TLS -5 to -19%, GET 100 KB h2c -16 to -30%, GET 1 KB h2 -11 to -13%, GET 1 KB h2c and gRPC unary level;
    /// the backend's CPU per request fell with ours (benchmarks/README.md, session 25). HTTP/2's writer loops already
    /// ran after the batch, but each of their flushes sent at once: now the flushes of a batch to one connection leave
    /// in one send (GET 100 KB h2c: 2.2 -> 1.4 sends per request).
    /// </remarks>
    private sealed class EndOfBatchScheduler : PipeScheduler
    {
        public static readonly EndOfBatchScheduler Instance = new();

        public override void Schedule(Action<object?> action, object? state)
        {
            if (!EpollEngine.TryDefer(action, state))
            {
                action(state);
            }
        }
    }

    private void CloseSocket()
    {
        try
        {
            _socket.Shutdown(SocketShutdown.Both);
        }
        catch (Exception e) when (e is SocketException or ObjectDisposedException)
        {
            // Already closed.
        }
        _socket.Dispose();
        // Wakes a loop waiting for an event that will not come now (the closed descriptor left epoll).
        _epoll?.Close();
    }

    private void SignalClosed()
    {
        if (Interlocked.Exchange(ref _closedSignaled, 1) == 0)
        {
            // Off the receive loop: callbacks are user code.
            ThreadPool.UnsafeQueueUserWorkItem(static cts =>
            {
                try
                {
                    cts.Cancel();
                }
                catch (ObjectDisposedException)
                {
                }
            }, _closedCts, preferLocal: false);
        }
    }
}
