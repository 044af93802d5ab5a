using System.Collections.Concurrent;
using System.Threading.Channels;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>
/// The server side of one HTTP/2 connection (RFC 9113). Two loops and no connection-wide lock:
/// the read loop (this class's <see cref="ProcessAsync"/>) owns the stream table, inbound windows, the HPACK
/// decoder, peer SETTINGS and abuse counters, and never waits on a stream or on the app; the
/// <see cref="FrameWriterLoop"/> owns everything outbound. Handlers run on the thread pool.
/// Other threads talk to the read loop through <see cref="PostEvent"/> and to the writer through its channel.
/// </summary>
// Owned by the read loop, except the fields under "Shared" (atomics, any thread).
public sealed partial class Http2Connection : IHttp2WriterOwner
{
    /// <summary>Payload of the PING that closes phase one of a graceful shutdown (RFC 9113 §6.8).</summary>
    internal const ulong ShutdownPingPayload = 0x0053_4855_5444_4F57; // "SHUTDOW"
    /// <summary>NOTE: how long phase one waits for the PING round trip before sending the final GOAWAY anyway (Go waits 1 s).</summary>
    private static readonly TimeSpan ShutdownPingTimeout = TimeSpan.FromSeconds(1);
    /// <summary>How long closing waits for the writer loop to put the last frames (GOAWAY) on the wire.</summary>
    private static readonly TimeSpan CloseWriteTimeout = TimeSpan.FromSeconds(5);

    private readonly PipeReader _input;
    private readonly PipeWriter _output;
    private readonly Http2Options _options;
    private readonly IHttpRequestHandler _handler;
    private readonly bool _handlerTakesEventLoop;
    private readonly ConnectionMetadata _metadata;
    private readonly TimeProvider _time;
    private readonly Channel<WriterMessage> _writerChannel;
    private readonly WriterWake _writerWake;
    private readonly FrameWriterLoop _writer;
    private readonly TaskCompletionSource _processCompleted = new(TaskCreationOptions.RunContinuationsAsynchronously);

    // ---- Owned by the read loop ----
    private readonly Dictionary<int, Http2Stream> _streams = new();
    private readonly HashSet<Http2Stream> _liveHandlers = new();
    // Streams that closed normally, reset for their next use (read loop only).
    private readonly IdleStreamPool<Http2Stream> _streamPool = new(MaxPooledStreams);

    /// <summary>
    /// Finished streams a connection keeps for its next ones: each saves two Pipes, the stream and its readers,
    /// writers, lists and token source, its request features and HttpContext (about 2 KB per request). As many as
    /// the default stream limit, so a client that runs 100 streams at once in waves (gRPC's channels do) reuses them
    /// all: with 32 kept, gRPC unary at 70 streams allocated 8.1 KB per call, with 100 kept 6.1 KB. One not reused
    /// within <see cref="PooledStreamExpiry"/> is dropped, so a connection that once ran many streams at once does not
    /// hold them for good (Kestrel: 100 and 5 s as well).
    /// </summary>
    private const int MaxPooledStreams = 100;

    /// <summary>How long a pooled stream waits for reuse before it is dropped.</summary>
    internal static readonly TimeSpan PooledStreamExpiry = TimeSpan.FromSeconds(5);

    /// <summary>Streams in the pool now (tests; written by the read loop only).</summary>
    internal int PooledStreamCount => _streamPool.Count;

    /// <summary>Runs on the read loop after the pool took or dropped streams (tests wait on it; null otherwise).</summary>
    internal Action? PoolChanged { get; set; }
    /// <summary>Streams that hold a SETTINGS_MAX_CONCURRENT_STREAMS slot: in the table, or reset but their handler still runs.</summary>
    private int _activeStreams;
    /// <summary>Streams we reset: their in-flight frames are ignored (RFC 9113 §5.4.2).</summary>
    private readonly RecentStreamIds _recentlyReset;
    /// <summary>Streams that were open and are closed now (any reason): HEADERS on them is STREAM_CLOSED, not an unexpected id.</summary>
    private readonly RecentStreamIds _recentlyClosed;
    private readonly HpackDecoder _decoder;
    private readonly RequestHeaderCollector _headerCollector;
    private Task _writerTask = Task.CompletedTask;
    private ITimer? _timer;
    private readonly TimeSpan[] _deadlines = [NoDeadline, NoDeadline, NoDeadline, NoDeadline, NoDeadline, NoDeadline, NoDeadline];
    // Read loop: scratch list of streams whose request-end grace passed (ResetStreamsPastRequestEnd).
    private readonly List<Http2Stream> _expiredRequestEnds = [];
    private long _timeOrigin;
    private int _lastStreamId;
    private bool _peerSettingsReceived;
    private bool _ourSettingsAcknowledged;
    private bool _peerGoingAway;
    private int _shutdownPhase; // 0 none, 1 first GOAWAY + PING sent, 2 final GOAWAY sent
    private bool _stopReading;
    private Http2ErrorCode? _gracefulCloseCode;
    private bool _writerFailed;
    private int _consecutiveEmptyFrames;
    private long _resetWindowStart;
    private int _resetsInWindow;

    // ---- Shared (atomics, any thread) ----
    private readonly ConcurrentQueue<ReadLoopEvent> _events = new();
    private readonly CancellationTokenSource _abortCts = new();

    private int _wakePending;
    private int _timerFired;
    private int _queuedControlFrames;
    private ReceiveWindow _connectionWindow;
    private volatile bool _writerChannelCompleted;

    public Http2Connection(IDuplexPipe transport, Http2Options options, IHttpRequestHandler handler, ConnectionMetadata meta, TimeProvider time)
    {
        ArgumentNullException.ThrowIfNull(transport);
        _input = transport.Input;
        _output = transport.Output;
        _options = options ?? throw new ArgumentNullException(nameof(options));
        _handler = handler ?? throw new ArgumentNullException(nameof(handler));
        _metadata = meta ?? throw new ArgumentNullException(nameof(meta));
        _handlerTakesEventLoop = handler is IEventLoopRequestHandler && meta.Scheduler.HasEventLoop;
        _time = time ?? TimeProvider.System;
        // Until the peer acknowledges our SETTINGS its encoder may use the protocol default (4,096); a smaller
        // configured table is applied at the ACK (OnOurSettingsAcknowledged).
        _decoder = new HpackDecoder(Math.Max(4096, options.HeaderTableSize), Math.Max(4096, 2 * options.MaxHeaderListSize));
        _recentlyReset = new RecentStreamIds(Math.Max(100, 2 * options.MaxConcurrentStreams));
        _recentlyClosed = new RecentStreamIds(Math.Max(100, 2 * options.MaxConcurrentStreams));
        _headerCollector = new RequestHeaderCollector(options.MaxHeaderListSize, options.MaxHeaderCount, meta.Scheme, options.AllowAlternateSchemes);
        RequestPipeOptions = Http2Stream.CreateRequestPipeOptions(options);
        StreamBlockSize = Http2Stream.StreamBlockSize(options);
        ResponsePipeOptions = Http2Stream.CreateResponsePipeOptions(options);
        var connectionWindow = Math.Max(65_535, options.InitialConnectionWindowSize);
        // One stream can hold at most its own window unread; the rest of the connection window keeps circulating
        // among the others, so returning credit in steps of half that rest always makes progress.
        _connectionWindow = new ReceiveWindow(connectionWindow,
            lowStep: Math.Max(1, Math.Min(Math.Max(1, connectionWindow / 2), connectionWindow - options.InitialStreamWindowSize) / 2));
        // Room for the control-frame cap, a scheduling signal per stream and replies; a full channel is never
        // grown: the read loop treats it as abuse, producers wait.
        var capacity = Math.Max(options.WriterQueueCapacity, options.MaxQueuedControlFrames + 4 * options.MaxConcurrentStreams + 64);
        _writerChannel = Channel.CreateBounded<WriterMessage>(new BoundedChannelOptions(capacity)
        {
            SingleReader = true,
            SingleWriter = false,
            FullMode = BoundedChannelFullMode.Wait,
            AllowSynchronousContinuations = false,
        });
        _writerWake = new WriterWake(meta.Scheduler);
        _writer = new FrameWriterLoop(this, options, _writerChannel.Reader, _writerWake, _output, _time, metrics: meta.Metrics);
    }

    /// <summary>True when new streams are offered to the handler on the event loop (<see cref="IEventLoopRequestHandler"/>).</summary>
    internal bool HandlerTakesEventLoop => _handlerTakesEventLoop;

    internal Http2Options Options => _options;

    /// <summary>The connection's scheduler (<see cref="ConnectionMetadata.Scheduler"/>).</summary>
    internal WorkScheduler Scheduler => _metadata.Scheduler;

    /// <summary>The writer loop has exited and lent bodies were handed back: a lend made now must end itself.</summary>
    internal bool LendsClosed => _lendsClosed;
    private volatile bool _lendsClosed;

    /// <summary>Shared by the request pipes of this connection's streams (immutable).</summary>
    internal PipeOptions RequestPipeOptions { get; }
    /// <summary>The largest block the stream pipes' pool hands out (received DATA is written a block at a time).</summary>
    internal int StreamBlockSize { get; }
    /// <summary>Shared by the response pipes of this connection's streams (immutable).</summary>
    internal PipeOptions ResponsePipeOptions { get; }

    /// <summary>The connection's metadata, as given by the host.</summary>
    public ConnectionMetadata Metadata => _metadata;

    /// <summary>Where streams are counted (the host's), or null.</summary>
    internal IProtocolMetrics? Metrics => _metadata.Metrics;

    /// <summary>
    /// Sends our SETTINGS, reads the client preface and runs the read loop until the connection closes
    /// (peer close, GOAWAY, error, shutdown, timeout or abort). Returns after the transport is completed.
    /// </summary>
    public async Task ProcessAsync(CancellationToken ct)
    {
        LoopOwner.Enter(this);
        using var registration = ct.Register(static state => ((Http2Connection)state!).Abort(), this);
        _timeOrigin = _time.GetTimestamp();
        _timer = _time.CreateTimer(static state => ((Http2Connection)state!).OnTimer(), this, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        _writerTask = _writer.RunAsync();
        Http2ErrorCode? goAway = null;
        try
        {
            // RFC 9113 §3.4 and the slowloris guard: the preface and first SETTINGS must come in time.
            SetTimeout(TimeoutKind.Preface, _options.RequestHeadersTimeout);
            if (await ReadPrefaceAsync())
            {
                await ReadFramesAsync();
            }
            goAway = _writerFailed ? null : _gracefulCloseCode;
        }
        catch (Http2ConnectionException ex)
        {
            // The one place a connection error becomes GOAWAY (RFC 9113 §5.4.1).
            goAway = ex.ErrorCode;
        }
        catch (OperationCanceledException) when (_abortCts.IsCancellationRequested)
        {
            goAway = null; // aborted: close without ceremony
        }
        catch (Exception)
        {
            goAway = _writerFailed ? null : Http2ErrorCode.InternalError;
        }
        finally
        {
            try
            {
                await CloseAsync(goAway);
            }
            finally
            {
                // Even if closing failed, ShutdownAsync must not wait forever.
                _timer.Dispose();
                _processCompleted.TrySetResult();
            }
        }
    }

    /// <summary>Starts the graceful two-phase shutdown of RFC 9113 §6.8: GOAWAY(2^31-1) + PING, then GOAWAY(last stream id); open streams finish.</summary>
    public void StartShutdown() => PostEvent(ReadLoopEvent.Shutdown());

    /// <summary>Starts a graceful shutdown and completes when the connection has closed.</summary>
    public Task ShutdownAsync()
    {
        StartShutdown();
        return _processCompleted.Task;
    }

    /// <summary>Closes the connection at once: no GOAWAY, every stream's RequestAborted fires.</summary>
    public void Abort(Exception? reason = null)
    {
        _ = reason;
        try
        {
            _abortCts.Cancel();
        }
        catch (ObjectDisposedException)
        {
            // Already closed.
        }
    }

    // ---- Hand-offs from other threads ----

    /// <summary>Posts an event for the read loop and wakes it (any thread).</summary>
    internal void PostEvent(ReadLoopEvent e)
    {
        _events.Enqueue(e);
        Wake();
    }

    private void Wake()
    {
        if (Interlocked.Exchange(ref _wakePending, 1) == 0)
        {
            try
            {
                _input.CancelPendingRead();
            }
            catch (InvalidOperationException)
            {
                // The reader already completed: the connection is closing.
            }
        }
    }

    private void OnTimer()
    {
        Interlocked.Exchange(ref _timerFired, 1);
        Wake();
    }

    // Any thread: queues a message for the writer loop and wakes it.
    private bool TryQueueToWriter(WriterMessage message)
    {
        if (!_writerChannel.Writer.TryWrite(message))
        {
            return false;
        }
        _writerWake.Signal();
        return true;
    }

    /// <summary>
    /// App threads (stream output signals, window updates, aborts). Never waits and never spawns a task: what a
    /// producer can queue is bounded by design (at most one output signal, abort and a couple of window updates
    /// per live stream, and live streams are capped), and the channel has room for that beyond the control-frame
    /// cap. A full channel therefore means a peer that stopped reading while churning streams: the connection is
    /// closed with ENHANCE_YOUR_CALM rather than letting a queue grow.
    /// </summary>
    internal void EnqueueFromProducer(WriterMessage message)
    {
        if (!TryQueueToWriter(message) && !_writerChannelCompleted)
        {
            PostEvent(ReadLoopEvent.Error(new Http2ConnectionException(
                "The writer queue is full.", Http2ErrorCode.EnhanceYourCalm, "writer_queue_full")));
        }
    }

    /// <summary>
    /// Read loop: every message the read loop queues (ACKs, window updates, resets, GOAWAY). These count toward
    /// MaxQueuedControlFrames; past it, or with a full channel, the peer is flooding us or not reading
    /// (CVE-2019-9512/9515). The read loop never waits on the writer and never queues through a task.
    /// </summary>
    private void EnqueueControl(WriterMessage message)
    {
        if (Interlocked.Increment(ref _queuedControlFrames) > _options.MaxQueuedControlFrames || !TryQueueToWriter(message.AsControl()))
        {
            throw new Http2ConnectionException("Too many control frames queued for writing.", Http2ErrorCode.EnhanceYourCalm, "control_frame_flood");
        }
    }

    /// <summary>Writer loop: a control frame left the queue.</summary>
    internal void OnControlFrameDequeued() => Interlocked.Decrement(ref _queuedControlFrames);

    void IHttp2WriterOwner.PostEvent(ReadLoopEvent e) => PostEvent(e);

    void IHttp2WriterOwner.OnControlFrameDequeued() => OnControlFrameDequeued();

    /// <summary>
    /// Any thread: request body bytes were consumed (or dropped) so the connection window can grow again.
    /// Credit is returned in steps of half the window, not per frame (smaller steps when the window runs low).
    /// </summary>
    internal void ReturnConnectionCredit(int bytes)
    {
        if (bytes <= 0)
        {
            return;
        }
        // NOTE: normally credit goes back in steps of half the window. When the peer's remaining window is below
        // that step (bytes sit unread in some stream that does not read its body), waiting for a full step
        // would stall every other stream of the connection: smaller steps then (ReceiveWindow's low step).
        var increment = _connectionWindow.Return(bytes);
        if (increment > 0)
        {
            EnqueueFromProducer(WriterMessage.WindowUpdate(0, increment));
        }
    }

    // ---- Timeouts (one deadline per kind, one timer armed for the earliest; the read loop decides) ----

    private enum TimeoutKind
    {
        Preface,
        HeaderBlock,
        KeepAlive,
        ShutdownPing,
        ShutdownDrain,
        RequestEnd,
        PooledStreamExpiry,
    }

    private static readonly TimeSpan NoDeadline = TimeSpan.MaxValue;

    /// <summary>Monotonic time since the connection started (timestamps, not the wall clock, which can jump).</summary>
    private TimeSpan Now => _time.GetElapsedTime(_timeOrigin);

    // NOTE: the read loop's clock for one pass (a wake's events and one read's frames), read at most once per pass: the
    // stream pool stamps every stream it takes back, and a clock read for each was almost half of a gRPC call's clock
    // reads (session 35). A pass is short, so a stamp up to one pass old only lets a pooled stream expire that much sooner.
    private TimeSpan _passNow;
    private bool _passNowRead;

    /// <summary>Read loop: <see cref="Now"/> as of this pass (see _passNow).</summary>
    private TimeSpan PassNow
    {
        get
        {
            if (!_passNowRead)
            {
                _passNow = Now;
                _passNowRead = true;
            }
            return _passNow;
        }
    }

    private void SetTimeout(TimeoutKind kind, TimeSpan after)
    {
        _deadlines[(int)kind] = after == Timeout.InfiniteTimeSpan ? NoDeadline : Now + after;
        ArmTimer();
    }

    private void ClearTimeout(TimeoutKind kind)
    {
        if (_deadlines[(int)kind] != NoDeadline)
        {
            _deadlines[(int)kind] = NoDeadline;
            ArmTimer();
        }
    }

    /// <summary>Arms the timer for the earliest deadline (or disarms it).</summary>
    private void ArmTimer()
    {
        var next = NoDeadline;
        foreach (var deadline in _deadlines)
        {
            if (deadline < next)
            {
                next = deadline;
            }
        }
        if (next == NoDeadline)
        {
            _timer?.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
            return;
        }
        var remaining = next - Now;
        _timer?.Change(remaining > TimeSpan.Zero ? remaining : TimeSpan.Zero, Timeout.InfiniteTimeSpan);
    }

    /// <summary>
    /// Runs every timeout whose deadline passed, then re-arms for the rest: timers may fire a little early, and
    /// a firing that finds nothing due must not lose the timeout.
    /// </summary>
    private void CheckTimeout()
    {
        if (Interlocked.Exchange(ref _timerFired, 0) == 0)
        {
            return;
        }
        var now = Now;
        for (var i = 0; i < _deadlines.Length; i++)
        {
            if (_deadlines[i] > now)
            {
                continue;
            }
            _deadlines[i] = NoDeadline;
            switch ((TimeoutKind)i)
            {
                case TimeoutKind.Preface:
                case TimeoutKind.HeaderBlock:
                    throw new Http2ConnectionException("The client did not send the preface, SETTINGS or a complete header block in time.",
                        Http2ErrorCode.ProtocolError, "request_headers_timeout");
                case TimeoutKind.KeepAlive:
                    Stop(Http2ErrorCode.NoError);
                    break;
                case TimeoutKind.ShutdownPing:
                    SendFinalGoAway();
                    break;
                case TimeoutKind.ShutdownDrain:
                    // The final GOAWAY is out; streams that did not finish in time are aborted by the close.
                    Stop(null);
                    break;
                case TimeoutKind.RequestEnd:
                    ResetStreamsPastRequestEnd(now);
                    break;
                case TimeoutKind.PooledStreamExpiry:
                    ExpirePooledStreams(now);
                    break;
            }
        }
        ArmTimer();
    }

    /// <summary>Re-arms the idle timer once no stream and no header block is in progress.</summary>
    private void UpdateIdleTimeout()
    {
        if (_headerBlockStreamId != 0)
        {
            return;
        }
        if (_streams.Count == 0)
        {
            // Idle: no stream finishes to trim the pool (TryPool does while busy), so a deadline does (armed below).
            if (_streamPool.OldestReturnedAt is { } oldest)
            {
                _deadlines[(int)TimeoutKind.PooledStreamExpiry] = oldest + PooledStreamExpiry;
            }
            SetTimeout(TimeoutKind.KeepAlive, _options.KeepAliveTimeout);
        }
        else
        {
            ClearTimeout(TimeoutKind.KeepAlive);
        }
    }

    /// <summary>Drops pooled streams not reused within <see cref="PooledStreamExpiry"/>; re-arms for the next one to expire.</summary>
    private void ExpirePooledStreams(TimeSpan now)
    {
        if (_streamPool.RemoveReturnedBefore(now - PooledStreamExpiry) > 0)
        {
            PoolChanged?.Invoke();
        }

        if (_streamPool.OldestReturnedAt is { } oldest)
        {
            _deadlines[(int)TimeoutKind.PooledStreamExpiry] = oldest + PooledStreamExpiry; // CheckTimeout re-arms after
        }
    }

    /// <summary>SETTINGS ACK from the peer: our advertised values now bind it (RFC 9113 §6.5.3).</summary>
    private void OnOurSettingsAcknowledged()
    {
        if (_ourSettingsAcknowledged)
        {
            return;
        }
        _ourSettingsAcknowledged = true;
        // RFC 7541 §4.2 / RFC 9113 §6.5.3: until now the peer's encoder could use the default 4,096-octet table;
        // from here on our (possibly smaller) SETTINGS_HEADER_TABLE_SIZE applies.
        if (_options.HeaderTableSize < 4096)
        {
            _decoder.SetMaxDynamicTableSize(_options.HeaderTableSize);
        }
    }

    // ---- Closing ----

    /// <summary>Ends the read loop gracefully with GOAWAY(<paramref name="code"/>), unless a final GOAWAY already went out.</summary>
    private void Stop(Http2ErrorCode? code)
    {
        _stopReading = true;
        _gracefulCloseCode = _shutdownPhase == 2 ? null : code;
    }

    private void BeginShutdown()
    {
        if (_shutdownPhase != 0)
        {
            return;
        }
        if (!_peerSettingsReceived)
        {
            Stop(Http2ErrorCode.NoError);
            return;
        }
        // Phase one: GOAWAY with 2^31-1 tells the client to stop opening streams, the PING measures a round
        // trip so streams already in flight are not lost (RFC 9113 §6.8).
        _shutdownPhase = 1;
        EnqueueControl(WriterMessage.GoAway(int.MaxValue, Http2ErrorCode.NoError));
        EnqueueControl(WriterMessage.Ping(ShutdownPingPayload));
        SetTimeout(TimeoutKind.ShutdownPing, ShutdownPingTimeout);
    }

    private void SendFinalGoAway()
    {
        if (_shutdownPhase == 2)
        {
            return;
        }
        _shutdownPhase = 2;
        EnqueueControl(WriterMessage.GoAway(_lastStreamId, Http2ErrorCode.NoError));
        ClearTimeout(TimeoutKind.ShutdownPing);
        if (_streams.Count == 0)
        {
            Stop(null);
            return;
        }
        // Open streams may finish, but not forever: one stuck handler must not keep the connection (and the host's shutdown) open.
        SetTimeout(TimeoutKind.ShutdownDrain, _options.ShutdownDrainTimeout);
    }

    private async Task CloseAsync(Http2ErrorCode? goAway)
    {
        _stopReading = true;
        _streamPool.Clear(); // no stream opens any more
        // Every stream is aborted below: the writer sends only what is queued for the connection (GOAWAY, resets),
        // no more HEADERS or DATA.
        _writer.DropStreamOutput();
        Array.Fill(_deadlines, NoDeadline);
        ArmTimer();
        if (goAway is { } code && _shutdownPhase != 2)
        {
            TryQueueToWriter(WriterMessage.GoAway(_lastStreamId, code));
        }
        _writerChannelCompleted = true;
        _writerChannel.Writer.TryComplete();
        _writerWake.Signal();
        foreach (var stream in _streams.Values)
        {
            stream.AbortFromConnection("The connection closed.");
        }
        foreach (var stream in _liveHandlers)
        {
            stream.AbortFromConnection("The connection closed.");
        }
        _streams.Clear();
        if (_abortCts.IsCancellationRequested || _writerFailed)
        {
            // Aborted, or the transport is failing: no ceremony, do not wait for a flush the peer may never take.
            _output.CancelPendingFlush();
        }
        try
        {
            await _writerTask.WaitAsync(CloseWriteTimeout, _time);
        }
        catch (TimeoutException)
        {
            _output.CancelPendingFlush();
            await _writerTask;
        }
        // The writer is gone: releasing app writers still waiting on backpressure is safe now, and so is handing lent
        // bodies back (nothing reads them any more). A lend published after this ends itself (LendsClosed).
        _lendsClosed = true;
        foreach (var stream in _liveHandlers)
        {
            stream.ResponseReader.Complete();
            stream.EndLentOutput();
        }
        await _input.CompleteAsync();
        await _output.CompleteAsync();
    }
}
