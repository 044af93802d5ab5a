using System.Collections.Concurrent;
using System.Threading.Channels;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http2.Client;

/// <summary>
/// The client side of one HTTP/2 connection (RFC 9113), used by the proxy's native relay to talk to backends. The
/// shape of the server side with the roles mirrored: a read loop (<see cref="RunAsync"/>) owns the inbound state and
/// the HPACK decoder; the same <see cref="FrameWriterLoop"/> the server uses owns everything outbound (it starts with
/// the client preface). Streams are opened from any thread by <see cref="TryOpen"/>.
/// </summary>
/// <remarks>
/// NOTE: stream ids are allocated under <c>_openLock</c> together with queueing the stream's first output signal, so
/// HEADERS reach the wire in id order (RFC 9113 §5.1.1: a new id MUST exceed every id already opened); the writer's
/// channel is FIFO and a new stream's first turn always writes its HEADERS.
/// </remarks>
// Owned by the read loop, except the fields under "Shared" (atomics, the open lock, any thread).
public sealed partial class Http2ClientConnection : IHttp2WriterOwner
{
    private readonly PipeReader _input;
    private readonly PipeWriter _output;
    private readonly Http2ClientOptions _clientOptions;
    private readonly Http2Options _options;
    private readonly TimeProvider _time;
    private readonly Channel<WriterMessage> _writerChannel;
    private readonly WriterWake _writerWake;
    private readonly FrameWriterLoop _writer;
    private readonly TaskCompletionSource _completed = new(TaskCreationOptions.RunContinuationsAsynchronously);

    // ---- Owned by the read loop ----
    private readonly HpackDecoder _decoder;
    private readonly ResponseHeaderCollector _collector;
    private readonly RecentStreamIds _recentlyReset;
    // NOTE: only a block split over CONTINUATION frames is gathered here (one with END_HEADERS is decoded in place), so
    // the buffer exists from the first such frame until the block ends: most connections never hold one, and one large
    // block does not keep its grown buffer for the connection's life (4 KiB per connection was 400 bytes per SSE stream).
    private ArrayBufferWriter<byte>? _headerBlockBuffer;
    private Task _writerTask = Task.CompletedTask;
    private ITimer? _timer;
    private bool _peerSettingsReceived;
    private bool _ourSettingsAcknowledged;
    private bool _stopReading;
    private bool _writerFailed;
    private Http2ErrorCode? _goAwayCode;
    private int _headerBlockStreamId;
    private int _headerBlockContinuations;
    private bool _headerBlockEndStream;
    private int _consecutiveEmptyFrames;
    private long _lastFrameTimestamp;
    private long _pingSentTimestamp;
    private bool _pingOutstanding;
    private ulong _pingPayload;
    private string _closeReason = "The backend closed the connection.";

    // ---- Shared ----
    private readonly object _openLock = new();
    private readonly ConcurrentDictionary<int, Http2ClientStream> _streams = new();
    private readonly ConcurrentQueue<ClientEvent> _events = new();
    private readonly CancellationTokenSource _abortCts = new();

    private int _nextStreamId = 1;          // under _openLock
    // Streams whose last life closed normally, reset for the next request (under _openLock). A stream not reused within
    // SpareStreamExpiry is dropped, so a connection that once ran many streams at once does not keep them all.
    private readonly IdleStreamPool<Http2ClientStream> _spareStreams = new(MaxSpareStreams);
    private const int MaxSpareStreams = 100;
    private static readonly TimeSpan SpareStreamExpiry = TimeSpan.FromSeconds(5);
    private readonly long _timeOrigin; // on _time, as every other clock of the connection
    private volatile int _highestOpenedId;  // written under _openLock, read by the read loop
    private volatile int _peerMaxConcurrentStreams;
    private volatile int _goAwayLastStreamId = int.MaxValue;
    private volatile bool _closed;          // written under _openLock
    private volatile bool _goingAway;       // GOAWAY received (or we are shutting down): no new streams
    private int _activeStreams;
    private int _wakePending;
    private int _timerFired;
    private int _queuedControlFrames;
    private ReceiveWindow _connectionWindow;
    private volatile bool _writerChannelCompleted;

    /// <param name="scheduler">
    /// Where the writer loop continues when woken, and the response head of a request that asks to continue on the event
    /// loop (<see cref="BackendRequest.ContinueOnEventLoop"/>); the thread pool when null.
    /// </param>
    public Http2ClientConnection(IDuplexPipe transport, Http2ClientOptions? options = null, TimeProvider? time = null, WorkScheduler? scheduler = null)
    {
        ArgumentNullException.ThrowIfNull(transport);
        _input = transport.Input;
        _output = transport.Output;
        _clientOptions = options ?? new Http2ClientOptions();
        _options = _clientOptions.Protocol;
        _time = time ?? TimeProvider.System;
        _timeOrigin = _time.GetTimestamp();
        _decoder = new HpackDecoder(Math.Max(4096, _options.HeaderTableSize), Math.Max(4096, 2 * _options.MaxHeaderListSize));
        _collector = new ResponseHeaderCollector(_options.MaxHeaderListSize, _options.MaxHeaderCount);
        _recentlyReset = new RecentStreamIds(Math.Max(100, 2 * _clientOptions.InitialMaxConcurrentStreams));
        _peerMaxConcurrentStreams = Math.Max(1, Math.Min(_clientOptions.InitialMaxConcurrentStreams, _clientOptions.MaxStreamsPerConnection));
        var connectionWindow = Math.Max(65_535, _options.InitialConnectionWindowSize);
        _connectionWindow = new ReceiveWindow(connectionWindow,
            lowStep: Math.Max(1, Math.Min(Math.Max(1, connectionWindow / 2), connectionWindow - _options.InitialStreamWindowSize) / 2));
        RequestPipeOptions = Http2Stream.CreateResponsePipeOptions(_options);   // outbound, like a server response
        StreamBlockSize = Http2Stream.StreamBlockSize(_options);
        ResponsePipeOptions = Http2Stream.CreateRequestPipeOptions(_options);   // inbound, like a server request
        Scheduler = scheduler ?? WorkScheduler.ThreadPool;
        // A relay that continues on the event loop (ContinueOnEventLoop) reads its response body there too.
        ResponsePipeOptionsOnEventLoop = Scheduler.HasEventLoop ? Http2Stream.CreateRequestPipeOptions(_options, Scheduler) : ResponsePipeOptions;
        // Room for the control-frame cap plus a few messages per stream we may have open (MaxStreamsPerConnection bounds it).
        var capacity = Math.Max(_options.WriterQueueCapacity, _options.MaxQueuedControlFrames + 4 * Math.Max(1, _clientOptions.MaxStreamsPerConnection) + 64);
        _writerChannel = Channel.CreateBounded<WriterMessage>(new BoundedChannelOptions(capacity)
        {
            SingleReader = true,
            SingleWriter = false,
            FullMode = BoundedChannelFullMode.Wait,
            AllowSynchronousContinuations = false,
        });
        _writerWake = new WriterWake(Scheduler);
        _writer = new FrameWriterLoop(this, _options, _writerChannel.Reader, _writerWake, _output, _time, clientRole: true);
    }

    /// <summary>Where the writer loop and event-loop streams' response heads continue (immutable).</summary>
    internal WorkScheduler Scheduler { get; }

    internal PipeOptions RequestPipeOptions { get; }
    /// <summary>The largest block the stream pipes' pool hands out (received DATA is written a block at a time).</summary>
    internal int StreamBlockSize { get; }
    internal PipeOptions ResponsePipeOptions { get; }
    /// <summary>The response pipes of streams whose relay continues on the event loop: the reader resumes there after the read loop's batch.</summary>
    internal PipeOptions ResponsePipeOptionsOnEventLoop { get; }

    /// <summary>Completes when the connection has closed (both loops ended, the transport completed).</summary>
    public Task Completion => _completed.Task;

    /// <summary>Streams open now (opened and not yet closed both ways or reset).</summary>
    public int ActiveStreams => Volatile.Read(ref _activeStreams);

    /// <summary>The backend's SETTINGS_MAX_CONCURRENT_STREAMS (our assumption until its SETTINGS arrive).</summary>
    public int MaxConcurrentStreams => _peerMaxConcurrentStreams;

    /// <summary>False once the connection closed or the backend sent GOAWAY: no new streams go here.</summary>
    public bool IsOpen => !_closed && !_goingAway;

    /// <summary>True when a new stream may open now (open, and below the backend's stream limit).</summary>
    public bool HasCapacity => IsOpen && ActiveStreams < _peerMaxConcurrentStreams && Volatile.Read(ref _nextStreamId) <= MaxStreamId;

    /// <summary>The last odd stream id we may open (RFC 9113 §5.1.1: ids cannot be reused; a new connection is needed after).</summary>
    private const int MaxStreamId = int.MaxValue - 2;

    /// <summary>Called (any thread) when a stream slot frees up or the connection stops taking streams: the pool's cue.</summary>
    public Action<Http2ClientConnection>? StateChanged { get; set; }

    /// <summary>
    /// Opens a stream for <paramref name="request"/> and queues its HEADERS (with END_STREAM when it has no body).
    /// Returns null when the connection takes no new streams (closed, going away, or at the backend's limit): the
    /// caller uses another connection. Throws <see cref="ArgumentException"/> for a request field we must not send.
    /// </summary>
    public BackendExchange? TryOpen(BackendRequest request)
    {
        ArgumentNullException.ThrowIfNull(request);
        // Validated before anything is taken (throws for a field we must not send); a request this connection cannot take
        // keeps its built list for the next one.
        var headers = Http2ClientStream.BuildHeaderBlock(request);
        Http2ClientStream stream;
        lock (_openLock)
        {
            if (_closed || _goingAway || _activeStreams >= _peerMaxConcurrentStreams)
            {
                return null;
            }
            if (_nextStreamId > MaxStreamId)
            {
                // Out of stream ids: no new streams here; the connection closes once its open ones finish.
                _goingAway = true;
                Post(new ClientEvent(ClientEventKind.Shutdown, null, 0));
                return null;
            }
            stream = _spareStreams.TryPop(out var spare) ? spare : new Http2ClientStream(this);
            stream.Start(request, headers, _options.InitialStreamWindowSize);
            var id = _nextStreamId;
            _nextStreamId += 2;
            stream.StreamId = id; // published last: the writer loop tells this life from the stream's earlier ones by it
            _streams[id] = stream;
            _highestOpenedId = id;
            Interlocked.Increment(ref _activeStreams);
            stream.SignalOutput();
        }
        return stream;
    }

    /// <summary>
    /// Runs the connection: the writer sends the preface and our SETTINGS, the read loop processes the backend's frames
    /// until the connection closes (backend close, GOAWAY with no streams left, error, dead keep-alive, abort).
    /// </summary>
    public async Task RunAsync(CancellationToken cancellationToken = default)
    {
        LoopOwner.Enter(this);
        using var registration = cancellationToken.Register(static state => ((Http2ClientConnection)state!).Abort(), this);
        _lastFrameTimestamp = _time.GetTimestamp();
        _timer = _time.CreateTimer(static state => ((Http2ClientConnection)state!).OnTimer(), this, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        ArmTimer();
        _writerTask = _writer.RunAsync();
        Http2ErrorCode? goAway = null;
        try
        {
            await ReadFramesAsync();
            goAway = _writerFailed ? null : _goAwayCode;
        }
        catch (Http2ConnectionException ex)
        {
            // The one place a connection error becomes GOAWAY (RFC 9113 §5.4.1).
            goAway = ex.ErrorCode;
            _closeReason = "HTTP/2 connection error: " + ex.Message;
        }
        catch (OperationCanceledException) when (_abortCts.IsCancellationRequested)
        {
            goAway = null;
        }
        catch (Exception ex)
        {
            goAway = _writerFailed ? null : Http2ErrorCode.InternalError;
            _closeReason = "The backend connection failed: " + ex.Message;
        }
        finally
        {
            try
            {
                await CloseAsync(goAway);
            }
            finally
            {
                _timer.Dispose();
                _completed.TrySetResult();
            }
        }
    }

    /// <summary>Stops taking new streams and closes once the open ones finish (GOAWAY NO_ERROR).</summary>
    public void StartShutdown() => Post(new ClientEvent(ClientEventKind.Shutdown, null, 0));

    /// <summary>Closes at once: every open stream fails with <see cref="BackendFailure.ConnectionLost"/>.</summary>
    public void Abort()
    {
        try
        {
            _abortCts.Cancel();
        }
        catch (ObjectDisposedException)
        {
        }
    }

    // ---- Hand-offs from other threads ----

    private enum ClientEventKind : byte
    {
        OutputEnded,
        Abandoned,
        WriterError,
        WriterFailed,
        Shutdown,
    }

    private readonly record struct ClientEvent(ClientEventKind Kind, Http2ClientStream? Stream, Http2ErrorCode Code, Exception? Error = null, bool WasReset = false);

    private void Post(ClientEvent e)
    {
        _events.Enqueue(e);
        Wake();
    }

    void IHttp2WriterOwner.PostEvent(ReadLoopEvent e)
    {
        switch (e.Kind)
        {
            case ReadLoopEventKind.OutputEnded:
                Post(new ClientEvent(ClientEventKind.OutputEnded, (Http2ClientStream)e.Stream!, 0, WasReset: e.WasReset));
                break;
            case ReadLoopEventKind.ProtocolError:
                Post(new ClientEvent(ClientEventKind.WriterError, null, 0, e.Exception));
                break;
            case ReadLoopEventKind.WriterFailed:
                Post(new ClientEvent(ClientEventKind.WriterFailed, null, 0, e.Exception));
                break;
        }
    }

    void IHttp2WriterOwner.OnControlFrameDequeued() => Interlocked.Decrement(ref _queuedControlFrames);

    /// <summary>The relay abandoned a stream (any thread): the read loop resets it unless it already closed both ways.</summary>
    internal void PostAbandon(Http2ClientStream stream, Http2ErrorCode code) => Post(new ClientEvent(ClientEventKind.Abandoned, stream, code));

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
            }
        }
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

    /// <summary>Relay threads: output signals and window updates. Bounded by design (see the server's twin); a full channel closes the connection.</summary>
    internal void EnqueueFromProducer(WriterMessage message)
    {
        if (!TryQueueToWriter(message) && !_writerChannelCompleted)
        {
            Post(new ClientEvent(ClientEventKind.WriterError, null, 0,
                new Http2ConnectionException("The writer queue is full.", Http2ErrorCode.EnhanceYourCalm, "writer_queue_full")));
        }
    }

    /// <summary>Read loop: control frames count toward MaxQueuedControlFrames (a backend flooding PINGs or SETTINGS, CVE-2019-9512/9515).</summary>
    private void EnqueueControl(WriterMessage message)
    {
        if (Interlocked.Increment(ref _queuedControlFrames) > _options.MaxQueuedControlFrames || !TryQueueToWriter(message.AsControl()))
        {
            throw new Http2ConnectionException("Too many control frames queued for writing.", Http2ErrorCode.EnhanceYourCalm, "control_frame_flood");
        }
    }

    /// <summary>Any thread: response bytes were consumed; connection credit goes back in steps (as on the server side).</summary>
    internal void ReturnConnectionCredit(int bytes)
    {
        if (bytes <= 0)
        {
            return;
        }
        var increment = _connectionWindow.Return(bytes);
        if (increment > 0)
        {
            EnqueueFromProducer(WriterMessage.WindowUpdate(0, increment));
        }
    }

    // ---- Timer: preface deadline and keep-alive PING (the read loop decides) ----

    private void OnTimer()
    {
        Interlocked.Exchange(ref _timerFired, 1);
        Wake();
    }

    private void ArmTimer()
    {
        TimeSpan next;
        if (!_peerSettingsReceived)
        {
            next = _clientOptions.PrefaceTimeout;
        }
        else if (_pingOutstanding)
        {
            next = _clientOptions.KeepAlivePingTimeout;
        }
        else
        {
            next = _clientOptions.KeepAlivePingDelay;
        }
        _timer?.Change(next, Timeout.InfiniteTimeSpan);
    }

    private void CheckTimer()
    {
        if (Interlocked.Exchange(ref _timerFired, 0) == 0)
        {
            return;
        }
        var now = _time.GetTimestamp();
        if (!_peerSettingsReceived)
        {
            if (_time.GetElapsedTime(_lastFrameTimestamp, now) >= _clientOptions.PrefaceTimeout)
            {
                throw new Http2ConnectionException("The backend did not send its SETTINGS in time.", Http2ErrorCode.SettingsTimeout, "preface_timeout");
            }
        }
        else if (_pingOutstanding)
        {
            if (_time.GetElapsedTime(_pingSentTimestamp, now) >= _clientOptions.KeepAlivePingTimeout)
            {
                _closeReason = "The backend did not answer a keep-alive PING in time.";
                throw new Http2ConnectionException(_closeReason, Http2ErrorCode.NoError, "ping_timeout");
            }
        }
        else if (_clientOptions.KeepAlivePingDelay != Timeout.InfiniteTimeSpan
            && _time.GetElapsedTime(_lastFrameTimestamp, now) >= _clientOptions.KeepAlivePingDelay)
        {
            _pingOutstanding = true;
            _pingSentTimestamp = now;
            _pingPayload = (ulong)now;
            EnqueueControl(WriterMessage.Ping(_pingPayload));
        }
        if (_clientOptions.KeepAlivePingDelay != Timeout.InfiniteTimeSpan || !_peerSettingsReceived)
        {
            ArmTimer();
        }
    }

    // ---- Closing ----

    private async Task CloseAsync(Http2ErrorCode? goAway)
    {
        _stopReading = true;
        lock (_openLock)
        {
            _closed = true;
            _spareStreams.Clear(); // no stream opens any more
        }
        StateChanged?.Invoke(this);
        _writer.DropStreamOutput();
        if (goAway is { } code)
        {
            TryQueueToWriter(WriterMessage.GoAway(0, code));
        }
        _writerChannelCompleted = true;
        _writerChannel.Writer.TryComplete();
        _writerWake.Signal();
        if (_abortCts.IsCancellationRequested || _writerFailed)
        {
            _output.CancelPendingFlush();
        }
        try
        {
            await _writerTask.WaitAsync(TimeSpan.FromSeconds(5), _time);
        }
        catch (TimeoutException)
        {
            _output.CancelPendingFlush();
            await _writerTask;
        }
        // The writer is done, so what it sent is settled. Streams above the backend's GOAWAY last id, and streams whose
        // HEADERS never left, were never processed: safe to retry elsewhere (RFC 9113 §6.8, §8.7).
        var lastProcessed = _goAwayLastStreamId;
        foreach (var stream in _streams.Values)
        {
            // NOTE: HeadersSent counts only when the writer adopted this life: a pooled stream keeps its last life's Send
            // fields until the writer meets it again, and a writer that stopped first never does.
            var headersSent = stream.Send.WriterStreamId == stream.StreamId && stream.Send.HeadersSent;
            var failure = stream.StreamId > lastProcessed || !headersSent ? BackendFailure.Refused : BackendFailure.ConnectionLost;
            FinishStream(stream, new BackendException(failure, _closeReason));
        }
        _streams.Clear();
        await _input.CompleteAsync();
        await _output.CompleteAsync();
    }

    /// <summary>Read loop: the stream is over for this connection; its slot frees and waiters see <paramref name="error"/> (null: ended normally).</summary>
    private void FinishStream(Http2ClientStream stream, BackendException? error)
    {
        if (error is not null)
        {
            stream.Fail(error);
        }
        if (stream.TryFinish())
        {
            var before = Interlocked.Decrement(ref _activeStreams) + 1;
            // The read loop's last touch of this life.
            stream.ReleaseFromReadLoop(normally: error is null);
            if (before >= _peerMaxConcurrentStreams || _goingAway)
            {
                StateChanged?.Invoke(this);
            }
        }
    }

    /// <summary>
    /// Both users let go of <paramref name="stream"/> (any thread: the last of the read loop and the relay): a life that
    /// closed normally is reset and kept for the next request.
    /// </summary>
    internal void Recycle(Http2ClientStream stream)
    {
        if (!stream.TryResetForPool())
        {
            return;
        }
        // NOTE: stamped with the time of the connection's last read, not a clock read per stream (almost half of a gRPC
        // call's clock reads, session 35): the stream's own last frame came in that read or before, so the stamp is at
        // most a little early, which only lets the spare stream expire that much sooner.
        var now = _time.GetElapsedTime(_timeOrigin, Volatile.Read(ref _lastFrameTimestamp));
        lock (_openLock)
        {
            if (!_closed)
            {
                _spareStreams.RemoveReturnedBefore(now - SpareStreamExpiry); // trimmed as streams come back, at no timer's cost
                _spareStreams.TryPush(stream, now);
            }
        }
    }

    /// <summary>Streams kept for reuse (tests).</summary>
    internal int SpareStreamCount
    {
        get
        {
            lock (_openLock)
            {
                return _spareStreams.Count;
            }
        }
    }
}
