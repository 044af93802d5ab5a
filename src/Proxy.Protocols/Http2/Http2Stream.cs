using Proxy.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>
/// One HTTP/2 stream as an <see cref="HttpExchange"/>. Its fields are grouped by owner: the read loop
/// (RFC state, inbound accounting), the frame-writer loop (outbound window, what is on the wire) and the
/// app (the response it builds). The few fields crossing owners are atomics or volatile hand-offs.
/// </summary>
// Owned by three parties, each field group below says which; cross-owner fields are atomics.
internal sealed partial class Http2Stream : HttpExchange, IThreadPoolWorkItem, IHttp2OutputSource
{
    private readonly Http2Connection _connection;
    private readonly IHttpRequestHandler _handler;
    private readonly CancellationTokenSource _abortedCts = new();
    // Created by the read loop for the first request of this (pooled) stream that has a body, before its dispatch; a
    // request that ends with its headers (a GET, an SSE subscription) reads an empty body and needs none (about 420 bytes
    // per open stream). _requestPipeInUse: this request's body is in it (read loop writes, before dispatch).
    private SpscPipe? _requestPipe;
    private bool _requestPipeInUse;
    private readonly SpscPipe _responsePipe;
    private readonly RequestBodyReader _requestBodyReader;
    private readonly ResponseBodyWriter _responseBodyWriter;

    public Http2Stream(Http2Connection connection, IHttpRequestHandler handler, int streamId, int initialReceiveWindow)
    {
        _connection = connection;
        _handler = handler;
        _streamId = streamId;
        Protocol = "HTTP/2";
        _initialReceiveWindow = initialReceiveWindow;
        _window = new ReceiveWindow(initialReceiveWindow);
        _responsePipe = new SpscPipe(connection.ResponsePipeOptions);
        _requestBodyReader = new RequestBodyReader(this);
        _responseBodyWriter = new ResponseBodyWriter(this, _responsePipe.Writer);
    }

    /// <summary>Options of the request pipe, built once per connection (they depend on its options).</summary>
    /// <remarks>
    /// NOTE: no pause threshold on the request pipe: the read loop must never wait on it. Its size is
    /// bounded by our stream window instead (RFC 9113 §6.9: the peer cannot send beyond it).
    /// </remarks>
    /// <param name="readerScheduler">Where the reader continues (the thread pool when null).</param>
    internal static PipeOptions CreateRequestPipeOptions(Http2Options options, PipeScheduler? readerScheduler = null)
        => new(pool: options.StreamMemoryPool, readerScheduler: readerScheduler, pauseWriterThreshold: 0, resumeWriterThreshold: 0, useSynchronizationContext: false,
            minimumSegmentSize: Math.Max(1, options.StreamMinimumSegmentSize));

    /// <summary>The largest block a stream pipe's pool hands out; past it a pipe rents from ArrayPool.Shared instead.</summary>
    internal static int StreamBlockSize(Http2Options options)
        => options.StreamMemoryPool is { MaxBufferSize: > 0 and < int.MaxValue } pool ? pool.MaxBufferSize : 4096;

    /// <summary>
    /// Options of the response pipe, built once per connection (they depend on its options). The app's
    /// FlushAsync waits once MaxStreamOutputBufferSize bytes are queued for the writer loop; it resumes on
    /// the thread pool, never inline on the writer loop (default writer scheduler).
    /// </summary>
    internal static PipeOptions CreateResponsePipeOptions(Http2Options options)
    {
        var outputLimit = Math.Max(1, options.MaxStreamOutputBufferSize);
        return new PipeOptions(pool: options.StreamMemoryPool, pauseWriterThreshold: outputLimit, resumeWriterThreshold: Math.Max(1, outputLimit / 2),
            readerScheduler: PipeScheduler.Inline, useSynchronizationContext: false, minimumSegmentSize: Math.Max(1, options.StreamMinimumSegmentSize));
    }

    /// <summary>
    /// The stream's id. A pooled stream gets a new one when it is reused (<see cref="Reuse"/>); the writer loop
    /// tells a stream's lives apart by it (<see cref="Http2SendState.WriterStreamId"/>).
    /// </summary>
    public int StreamId => Volatile.Read(ref _streamId);

    /// <summary>Server streams are opened by the client.</summary>
    bool IHttp2OutputSource.IsLocallyInitiated => false;

    private int _streamId;
    private readonly int _initialReceiveWindow;

    // ---- Owned by the read loop ----

    internal Http2StreamState State { get; set; } = Http2StreamState.Idle;
    internal long ReceivedBodyLength { get; set; }
    internal bool OutputEnded { get; set; }
    internal bool HandlerFinished { get; set; }

    /// <summary>The host's metrics counted this life of the stream as active (set by the read loop before the handler runs).</summary>
    internal bool CountedActive { get; set; }
    /// <summary>Closed by END_STREAM both ways, never reset: the only way into the connection's stream pool.</summary>
    internal bool ClosedNormally { get; set; }
    /// <summary>
    /// The response is complete but the request has not ended: the stream waits until <see cref="RequestEndDeadline"/>
    /// for the client's END_STREAM before it is reset (<see cref="Http2Options.RequestEndGracePeriod"/>).
    /// </summary>
    internal bool AwaitingRequestEnd { get; set; }
    internal TimeSpan RequestEndDeadline { get; set; }

    // ---- Owned by the frame-writer loop ----

    /// <summary>The writer loop's fields of this stream (window, HEADERS sent, scheduling).</summary>
    public Http2SendState Send { get; } = new();
    internal PipeReader ResponseReader => _responsePipe.Reader;
    PipeReader IHttp2OutputSource.OutputReader => _responsePipe.Reader;

    // ---- Handed from the app to the writer loop (written once before the output signal) ----

    private volatile List<KeyValuePair<string, string>>? _submittedHeaders;
    private volatile List<KeyValuePair<string, string>>? _submittedTrailers;
    private volatile bool _abortRequested;
    public List<KeyValuePair<string, string>>? SubmittedHeaders => _submittedHeaders;

    // NOTE: the lists stay with the stream: TryResetForPool keeps them (emptied) for the next response's HEADERS and
    // trailers, so a pooled stream builds its field lists without allocating (two lists and their arrays per response).
    private List<KeyValuePair<string, string>>? _spareHeaderList;
    private List<KeyValuePair<string, string>>? _spareTrailerList;
    // A list grown past this by one large response is not kept.
    private const int MaxSpareListCapacity = 64;

    void IHttp2OutputSource.OnHeadersSent() { }
    public List<KeyValuePair<string, string>>? SubmittedTrailers => _submittedTrailers;
    public bool AbortRequested => _abortRequested;
    /// <summary>The read loop closed the stream (peer reset, stream error, connection closing): nothing more goes out.</summary>
    public bool OutputReleased => _outputReleased;

    // ---- Shared atomics ----

    private int _outputSignaled;      // 1 while a StreamOutput message is queued or about to be
    private int _responseStarted;     // app: set once by StartResponseAsync
    private int _responseCompleted;   // app: set once by CompleteAsync
    private ReceiveWindow _window;    // read loop debits on DATA; the consumer returns credit
    private long _bufferedBodyBytes;  // in the request pipe, not yet consumed by the app
    private volatile bool _requestBodyAbandoned;
    private volatile bool _outputReleased; // read loop: the peer will never get more of this response
    private volatile bool _remoteEnded;
    private FileOutput? _fileOutput;  // app: set by SendFileAsync; cleared by the writer loop when done, or when the stream ends
    private volatile bool _fileOutputClosed; // set by whichever side ends the stream's output for good

    public override PipeReader RequestBody => _requestBodyReader;
    public override CancellationToken RequestAborted => _abortedCts.Token;
    public override bool SupportsTrailers => true;
    public override bool HasResponseStarted => Volatile.Read(ref _responseStarted) == 1;
    public override PipeWriter ResponseBody => _responseBodyWriter;

    /// <summary>Sets the request line fields from a validated header block (read loop, before dispatch).</summary>
    internal void InitializeRequest(RequestHeaderCollector headers, bool endStream)
    {
        Method = headers.Method!;
        Scheme = headers.Scheme ?? "";
        Authority = headers.Authority ?? headers.Host ?? "";
        RawTarget = headers.Path ?? "";
        RequestContentLength = headers.ContentLength;
        RequestHasBody = !endStream;
        RequestHeaders.AddRange(headers.Fields);
        State = Http2StreamStateMachine.OnHeadersReceived(endStream);
        if (endStream)
        {
            _remoteEnded = true;
            _requestPipeInUse = false;
            _requestBodyReader.Attach(null);
        }
        else
        {
            _requestPipe ??= new SpscPipe(_connection.HandlerTakesEventLoop
                ? CreateRequestPipeOptions(_connection.Options, new BodyReaderScheduler(this, _connection.Scheduler)) // kept with the pooled stream
                : _connection.RequestPipeOptions);
            _requestPipeInUse = true;
            _requestBodyReader.Attach(_requestPipe.Reader);
        }
    }

    // ---- Read loop side of the request body ----

    /// <summary>Current receive window (read loop reads it before accepting DATA).</summary>
    internal int ReceiveWindow => _window.Available;

    /// <summary>Debits the stream window for a DATA frame (read loop). The caller checked the window first.</summary>
    internal void DebitReceiveWindow(int flowControlledLength) => _window.Debit(flowControlledLength);

    /// <summary>
    /// Copies DATA into the request pipe (read loop). Returns the bytes the connection can credit back at
    /// once because nobody will ever read them (the app already completed the body reader).
    /// </summary>
    internal int DeliverRequestData(in ReadOnlySequence<byte> data)
    {
        if (data.IsEmpty)
        {
            return 0;
        }
        if (!_requestPipeInUse)
        {
            return (int)data.Length; // no body was announced (never expected: DATA after END_STREAM is refused before)
        }
        Interlocked.Add(ref _bufferedBodyBytes, data.Length);
        if (_requestBodyAbandoned)
        {
            return (int)Interlocked.Exchange(ref _bufferedBodyBytes, 0);
        }
        try
        {
            foreach (var segment in data)
            {
                _requestPipe!.Writer.WriteInBlocks(segment.Span, _connection.StreamBlockSize);
            }
            // Never pending (the pipe has no pause threshold), so this does not block the read loop.
            var flush = _requestPipe!.Writer.FlushAsync();
            if (!flush.IsCompletedSuccessfully)
            {
                flush.AsTask().GetAwaiter().GetResult(); // completed with an error: rethrows it
            }
        }
        catch (Exception)
        {
            // The app completed the body reader (possibly with an exception) while this frame arrived: its bytes
            // will never be read. Never let that escape into the read loop (it would close the whole connection).
            return (int)Interlocked.Exchange(ref _bufferedBodyBytes, 0);
        }
        if (_requestBodyAbandoned)
        {
            return (int)Interlocked.Exchange(ref _bufferedBodyBytes, 0);
        }
        return 0;
    }

    /// <summary>END_STREAM received (read loop): completes the request body after trailers were stored.</summary>
    internal void EndRequestBody()
    {
        _remoteEnded = true;
        if (_requestPipeInUse)
        {
            _requestPipe!.Writer.Complete();
        }
    }

    /// <summary>
    /// The stream is gone for the peer (reset either way, or the connection closed): cancel RequestAborted, then
    /// fail the request body. Unread request bytes are credited back when the body reader completes.
    /// </summary>
    /// <remarks>
    /// NOTE: in that order, so an app whose body read faults sees RequestAborted already cancelled in its catch
    /// (<see cref="RequestAbortSignal"/>); the app's callbacks on the token run on the thread pool, never here on
    /// the read loop.
    /// </remarks>
    internal void AbortFromConnection(string reason)
    {
        _remoteEnded = true;
        // Release an app waiting in FlushAsync at once, even if the writer loop is stuck on a peer that does
        // not read: later flushes report IsCompleted and later writes are dropped. The reader stays the
        // writer loop's to complete.
        // NOTE: released before the app learns of the abort (the token, the failed body read below): an app that answers
        // the failure at once (a 400 for a body that broke its content-length) must not get HEADERS out ahead of the
        // RST_STREAM the read loop queues next.
        _outputReleased = true;
        _responsePipe.Writer.CancelPendingFlush();
        EndFileOutput();
        EndLentOutput();
        RequestAbortSignal.Fire(_abortedCts);
        if (_requestPipeInUse)
        {
            _requestPipe!.Writer.Complete(new IOException(reason));
        }
    }

    // ---- App side of the request body: return credit as the app consumes (RFC 9113 §6.9) ----

    private void OnRequestBodyConsumed(long bytes)
    {
        if (bytes <= 0)
        {
            return;
        }
        Interlocked.Add(ref _bufferedBodyBytes, -bytes);
        _connection.ReturnConnectionCredit((int)bytes);
        if (_remoteEnded)
        {
            return; // no more DATA can come on this stream: no stream credit needed
        }
        var increment = _window.Return((int)bytes);
        if (increment > 0)
        {
            _connection.EnqueueFromProducer(WriterMessage.WindowUpdate(StreamId, increment));
        }
    }

    /// <summary>The app (or the engine after the handler) completed the body reader: unread bytes go back to the connection.</summary>
    private void MarkRequestBodyAbandoned() => _requestBodyAbandoned = true;

    private void OnRequestBodyAbandoned()
    {
        var left = Interlocked.Exchange(ref _bufferedBodyBytes, 0);
        if (left > 0)
        {
            _connection.ReturnConnectionCredit((int)left);
        }
    }

    /// <summary>Credit the read loop returns for padding (stream part), counted like consumed bytes.</summary>
    internal void ReturnPaddingCredit(int bytes)
    {
        if (bytes > 0 && !_remoteEnded)
        {
            var increment = _window.Return(bytes);
            if (increment > 0)
            {
                _connection.EnqueueFromProducer(WriterMessage.WindowUpdate(StreamId, increment));
            }
        }
    }

    // ---- Pooling (read loop) ----

    /// <summary>
    /// Read loop: readies a stream that closed normally (<see cref="ClosedNormally"/>), whose handler finished and
    /// whose output the writer loop stopped, for the connection's pool. Returns false when it cannot be reused: it
    /// was aborted or reset on some path, or a pipe is not complete at both ends.
    /// </summary>
    /// <remarks>
    /// NOTE: nobody else touches it now. The handler posted HandlerFinished as its last act; the writer loop posted
    /// OutputEnded after its last use of the pipes, and until it sees a new <see cref="StreamId"/> it only reads its
    /// own fields (OutputStopped) for this stream. The app must not use the exchange after its handler returned (the
    /// same rule as Kestrel's, whose streams are pooled too). The writer loop's fields are reset by the writer loop.
    /// </remarks>
    internal bool TryResetForPool()
    {
        // TryReset also drops registrations an app left on RequestAborted: they must not fire for the next request.
        if (_abortRequested || _outputReleased || Volatile.Read(ref _lentOutput) is not null || !_abortedCts.TryReset())
        {
            return false;
        }
        try
        {
            if (_requestPipeInUse)
            {
                _requestPipe!.Reset();
            }
            _responsePipe.Reset();
        }
        catch (InvalidOperationException)
        {
            return false; // an end not completed: never expected for a normally closed stream, but then not reused
        }
        // App side (its handler finished).
        _spareHeaderList = Spare(_submittedHeaders) ?? _spareHeaderList;
        _spareTrailerList = Spare(_submittedTrailers) ?? _spareTrailerList;
        _submittedHeaders = null;
        _submittedTrailers = null;
        _outputSignaled = 0;
        _responseStarted = 0;
        _responseCompleted = 0;
        _window.Reset(_initialReceiveWindow);
        _bufferedBodyBytes = 0;
        _requestBodyAbandoned = false;
        _remoteEnded = false;
        _fileOutput = null;
        _fileOutputClosed = false;
        ResetLentForPool();
        _requestBodyReader.Reset();
        _responseBodyWriter.Reset();
        StatusCode = 200;
        ReasonPhrase = null;
        RequestHeaders.Clear();
        RequestTrailers.Clear();
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        // HostState stays: the host's per-request state travels with the pooled stream to its next request, as it
        // does with an HTTP/1.1 connection's exchange (the server resets its features when it finds them there).
        // Read loop side.
        State = Http2StreamState.Idle;
        ReceivedBodyLength = 0;
        OutputEnded = false;
        HandlerFinished = false;
        ClosedNormally = false;
        AwaitingRequestEnd = false;
        _offerOnEventLoop = false;
        _declined = false;
        _bodyOnEventLoop = false;
        return true;
    }

    private static List<KeyValuePair<string, string>>? Spare(List<KeyValuePair<string, string>>? used)
    {
        if (used is not { Capacity: <= MaxSpareListCapacity })
        {
            return null;
        }
        used.Clear();
        return used;
    }

    /// <summary>Read loop: a pooled stream takes its new id; published last, after every reset above and before the stream is handed on.</summary>
    internal void Reuse(int streamId) => Volatile.Write(ref _streamId, streamId);

    // ---- Handler dispatch ----

    // Set by the read loop before it defers the stream to the end of its event loop's batch (StartOnEventLoop), cleared
    // by the first Execute.
    private bool _offerOnEventLoop;
    // This request was taken on the event loop: its body's reader resumes there too (BodyReaderScheduler). Set before
    // the handler first reads; the read loop's later flushes read it.
    private volatile bool _bodyOnEventLoop;

    /// <summary>
    /// The request pipe's reader scheduler on a connection whose handler takes streams on the event loop: a request taken
    /// there reads its body there (our code), any other one on the thread pool (the app's).
    /// </summary>
    private sealed class BodyReaderScheduler(Http2Stream stream, WorkScheduler loop) : PipeScheduler
    {
        public override void Schedule(Action<object?> action, object? state)
        {
            if (stream._bodyOnEventLoop)
            {
                loop.Schedule(action, state);
            }
            else
            {
                System.Threading.ThreadPool.UnsafeQueueUserWorkItem(action, state, preferLocal: false);
            }
        }
    }

    /// <summary>
    /// Read loop: offers the stream to the handler's event-loop side (<see cref="IEventLoopRequestHandler"/>) at the end
    /// of the current batch, on this thread. False when the thread is not an event loop: the caller queues it to the pool.
    /// </summary>
    internal bool TryStartOnEventLoop(WorkScheduler scheduler)
    {
        _offerOnEventLoop = true;
        if (scheduler.TryDefer(this))
        {
            return true;
        }
        _offerOnEventLoop = false;
        return false;
    }

    /// <summary>
    /// On the thread pool (queued by the read loop), or at the end of the read loop's batch for a handler that takes
    /// streams on the event loop: never app code on a connection loop.
    /// </summary>
    void IThreadPoolWorkItem.Execute()
    {
        if (!_offerOnEventLoop)
        {
            _bodyOnEventLoop = false;
            RunHandler(null);
            return;
        }

        _offerOnEventLoop = false;
        _bodyOnEventLoop = true;
        var handler = (IEventLoopRequestHandler)_handler;
        Task? taken;
        try
        {
            taken = handler.TryHandleOnEventLoop(this);
        }
        catch (Exception ex)
        {
            taken = Task.FromException(ex); // answered as a handler's failure
        }
        if (taken is null)
        {
            _bodyOnEventLoop = false;
            _declined = true;
            ThreadPool.UnsafeQueueUserWorkItem(this, preferLocal: false); // the app's handler: never on the loop
            return;
        }
        RunHandler(taken);
    }

    // Set when the event-loop side declined this request (the pool then runs the declined handler), reset per request.
    private bool _declined;

    // NOTE: the handler's task is waited on with a continuation made once per pooled stream, not by an async method: a
    // forwarded request's handler always waits (for the backend), and the async method's state-machine box was 104-140
    // bytes of every HTTP/2 request. The tail (complete the response, tell the read loop) runs where the task completed,
    // as an await's continuation would; only a CompleteAsync that has to wait goes through an async method.
    private Task? _handlerTask;
    private Action? _onHandlerCompleted;

    private void RunHandler(Task? started)
    {
        if (started is null)
        {
            try
            {
                var handler = _declined ? ((IEventLoopRequestHandler)_handler).Declined : _handler;
                _declined = false;
                started = handler.HandleAsync(this);
            }
            catch (Exception ex)
            {
                started = Task.FromException(ex);
            }
        }
        started ??= Task.FromException(new InvalidOperationException("The request handler returned no task."));
        if (started.IsCompleted)
        {
            CompleteHandler(started);
            return;
        }
        _handlerTask = started;
        started.ConfigureAwait(false).GetAwaiter().UnsafeOnCompleted(_onHandlerCompleted ??= OnHandlerTaskCompleted);
    }

    private void OnHandlerTaskCompleted()
    {
        var started = _handlerTask!;
        _handlerTask = null;
        CompleteHandler(started);
    }

    private void CompleteHandler(Task started)
    {
        try
        {
            OnHandlerCompleted(started);
        }
        catch (Exception)
        {
            // Runs on the read loop's thread, the pool's, or as the completing thread's continuation (an event loop's):
            // nothing may escape into it.
            Abort((uint)Http2ErrorCode.InternalError);
        }
    }

    private void OnHandlerCompleted(Task handler)
    {
        if (!handler.IsCompletedSuccessfully)
        {
            _ = handler.Exception; // observed: a failed handler is answered here, not left to the unobserved-task event
            if (!HasResponseStarted && !_abortRequested)
            {
                StatusCode = 500;
                ResponseHeaders.Clear();
                ResponseTrailers.Clear();
            }
            else
            {
                Abort((uint)Http2ErrorCode.InternalError);
            }
        }
        ValueTask complete;
        try
        {
            complete = CompleteAsync();
        }
        catch (Exception ex)
        {
            complete = ValueTask.FromException(ex);
        }
        if (!complete.IsCompleted)
        {
            _ = FinishAfterCompleteAsync(complete);
            return;
        }
        try
        {
            complete.GetAwaiter().GetResult();
        }
        catch (Exception) when (!HasResponseStarted && !_abortRequested)
        {
            // The app left a field we must not send (CompleteAsync validates before starting): answer 500.
            _ = AnswerInternalErrorThenFinishAsync();
            return;
        }
        catch (Exception)
        {
            Abort((uint)Http2ErrorCode.InternalError);
        }
        FinishHandler();
    }

    private async Task FinishAfterCompleteAsync(ValueTask complete)
    {
        try
        {
            await complete;
        }
        catch (Exception) when (!HasResponseStarted && !_abortRequested)
        {
            await AnswerInternalErrorThenFinishAsync();
            return;
        }
        catch (Exception)
        {
            Abort((uint)Http2ErrorCode.InternalError);
        }
        FinishHandler();
    }

    private async Task AnswerInternalErrorThenFinishAsync()
    {
        StatusCode = 500;
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        await CompleteOrAbortAsync();
        FinishHandler();
    }

    /// <summary>The handler and the response are done: the stream's last touch from the handler's side.</summary>
    private void FinishHandler()
    {
        _requestBodyReader.Complete();
        if (CountedActive)
        {
            _connection.Metrics?.StreamEnded();
        }
        _connection.PostEvent(ReadLoopEvent.HandlerFinished(this));
    }

    private async Task CompleteOrAbortAsync()
    {
        try
        {
            await CompleteAsync();
        }
        catch (Exception)
        {
            Abort((uint)Http2ErrorCode.InternalError);
        }
    }
}
