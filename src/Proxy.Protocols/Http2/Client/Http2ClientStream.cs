using Proxy.Buffers;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Threading.Tasks.Sources;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http2.Client;

/// <summary>
/// One stream of a client connection: the mirror image of the server's <see cref="Http2Stream"/>. The request goes
/// out through the connection's frame-writer loop (this is its <see cref="IHttp2OutputSource"/>); the response comes
/// in on the read loop into a pipe the relay reads, and consuming it is what returns flow-control credit to the
/// backend, so the bytes a stream holds are bounded by its receive window.
/// </summary>
// Owned by three parties, as a server stream: the read loop (response side, RFC state), the frame-writer loop
// (Send) and the relay (request body writer, response body reader). Cross-owner fields are atomics or volatile.
// Pooled by its connection, as server streams are: each life starts in Start (under the connection's open lock) and
// ends when both the read loop and the relay let go of it (Release); a life that closed normally both ways is reset
// (TryResetForPool) and kept for the next request. StreamId, published last, tells the lives apart for the writer loop.
internal sealed class Http2ClientStream : BackendExchange, IHttp2OutputSource, IValueTaskSource
{
    private readonly Http2ClientConnection _connection;
    // NOTE: made for the first life whose request has a body, then kept by the pooled stream; a request without one
    // (GET, an SSE subscription) never makes it: HEADERS carries END_STREAM and nothing else is sent, so such a stream
    // does not hold a pipe and its writer for its whole life (about 450 bytes per relayed stream).
    private SpscPipe? _requestPipe;
    private RequestBodyWriter? _requestWriter;
    private SpscPipe _responsePipe;
    // Which reader scheduler the response pipe was made with (a life that continues on the event loop needs that one).
    private bool _responsePipeOnEventLoop;
    private readonly ResponseBodyReader _responseReader;
    // The response head's arrival (or the stream's failure): the stream is its own one-shot value-task source, which
    // saves the TaskCompletionSource, its Task and a Task.WaitAsync promise per call. Its continuation never runs on the
    // read loop that completes it (the loop serves every stream of the connection): on the thread pool, or, for a request
    // that continues on the event loop, after the read loop's batch on its thread (_onEventLoop, see CompleteHead).
    private ManualResetValueTaskSourceCore<bool> _head;
    // The relay asked to continue on the event loop (BackendRequest.ContinueOnEventLoop) and the connection has one: the
    // head's continuation and the response body's reader resume there.
    private bool _onEventLoop;
    private Exception? _headError;
    private int _headSet;
    private int _headAwaited;
    // The token the head's reader gave while the head was still to come: its cancellation aborts the stream (RST_STREAM
    // CANCEL), which fails the head, and GetResult then throws the token's exception. The registration ends in GetResult.
    private CancellationToken _headToken;
    private CancellationTokenRegistration _headRegistration;
    // Built here, then the writer loop's: read until it sent HEADERS, then dropped by it (OnHeadersSent), so a long-lived
    // stream does not keep its request's field list.
    private List<KeyValuePair<string, string>>? _headers;

    // Who still uses this life: the read loop (until the stream closed or failed) and the relay (until DisposeAsync).
    private int _users;
    // The read loop closed this life normally, END_STREAM both ways (set before its release).
    private volatile bool _closedNormally;
    private int _disposed;

    public Http2ClientStream(Http2ClientConnection connection)
    {
        _connection = connection;
        _responsePipe = new SpscPipe(connection.ResponsePipeOptions);
        _responseReader = new ResponseBodyReader(this);
    }

    /// <summary>
    /// Starts a life for <paramref name="request"/>, whose HEADERS list <paramref name="headers"/> was built by
    /// <see cref="BuildHeaderBlock"/>. Under the connection's open lock, before the new <see cref="StreamId"/> is published.
    /// </summary>
    internal void Start(BackendRequest request, List<KeyValuePair<string, string>> headers, int initialReceiveWindow)
    {
        _onEventLoop = request.ContinueOnEventLoop && _connection.Scheduler.HasEventLoop;
        if (_onEventLoop != _responsePipeOnEventLoop)
        {
            _responsePipe = new SpscPipe(_onEventLoop ? _connection.ResponsePipeOptionsOnEventLoop : _connection.ResponsePipeOptions);
            _responsePipeOnEventLoop = _onEventLoop;
        }
        if (request.HasBody && _requestPipe is null)
        {
            _requestPipe = new SpscPipe(_connection.RequestPipeOptions);
            _requestWriter = new RequestBodyWriter(this, _requestPipe.Writer);
        }
        HasRequestBody = request.HasBody;
        IsHead = request.Method == "HEAD";
        _window = new ReceiveWindow(initialReceiveWindow);
        _headers = headers;
        _head.RunContinuationsAsynchronously = !_onEventLoop;
        _users = 2;
    }

    /// <summary>
    /// The HEADERS field list: pseudo-headers first (RFC 9113 §8.3.1), then the fields. The request's fields were
    /// validated by whoever built it; here the rules that make an HTTP/2 request malformed are enforced once more
    /// (names lowercase tokens, no connection-specific fields, values without NUL/CR/LF), throwing before anything is
    /// queued, so nothing invalid ever reaches the connection's HPACK encoder.
    /// </summary>
    /// <remarks>
    /// NOTE: built in the request's own list, which is the connection's once the request is started (BackendRequest):
    /// a copy was a list and its array per request. A request sent again (refused by a backend) finds its list built
    /// already, pseudo-headers first, and sends it as it is.
    /// </remarks>
    internal static List<KeyValuePair<string, string>> BuildHeaderBlock(BackendRequest request)
    {
        var fields = request.Headers;
        if (fields is [{ Key: ":method" }, ..])
        {
            return fields;
        }
        if (!HttpFieldRules.IsToken(request.Method))
        {
            throw new ArgumentException($"Invalid request method '{request.Method}'.", nameof(request));
        }
        if (request.PathAndQuery.Length == 0 || request.PathAndQuery[0] != '/' || !HttpFieldRules.IsVisible(request.PathAndQuery))
        {
            throw new ArgumentException($"Invalid request target '{request.PathAndQuery}': an origin-form path is required.", nameof(request));
        }
        if (request.Authority.Length == 0 || !HttpFieldRules.IsVisible(request.Authority) || request.Authority.Contains('@'))
        {
            throw new ArgumentException($"Invalid authority '{request.Authority}'.", nameof(request));
        }
        // Validated, lowercased and filtered in place: the fields kept move down over the ones dropped.
        var kept = 0;
        var hasContentLength = false;
        for (var i = 0; i < fields.Count; i++)
        {
            var (name, value) = fields[i];
            if (!HttpFieldRules.IsToken(name))
            {
                throw new ArgumentException($"Invalid header name '{name}'.", nameof(request));
            }
            if (!HttpFieldRules.IsSendableValue(value))
            {
                throw new ArgumentException($"Invalid value for header '{name}': NUL, CR, LF and characters above U+00FF are not allowed.", nameof(request));
            }
            var lower = KnownHeaderStrings.LowercaseName(name);
            if (HttpFieldRules.IsConnectionSpecificInRequest(lower, value) || lower is "host")
            {
                continue;
            }
            if (lower == "content-length")
            {
                if (hasContentLength || request.ContentLength is not null)
                {
                    continue; // one content-length, the declared one wins
                }
                hasContentLength = true;
            }
            fields[kept++] = new(lower, value);
        }
        fields.RemoveRange(kept, fields.Count - kept);
        if (request.ContentLength is { } length)
        {
            fields.Add(new("content-length", length.ToString(CultureInfo.InvariantCulture)));
        }
        // Room for the four pseudo-headers at the front: the fields move up in one copy.
        const int Pseudo = 4;
        var count = fields.Count;
        System.Runtime.InteropServices.CollectionsMarshal.SetCount(fields, count + Pseudo);
        var span = System.Runtime.InteropServices.CollectionsMarshal.AsSpan(fields);
        span[..count].CopyTo(span[Pseudo..]);
        span[0] = new(":method", request.Method);
        span[1] = new(":scheme", request.Scheme);
        span[2] = new(":authority", request.Authority);
        span[3] = new(":path", request.PathAndQuery);
        return fields;
    }

    internal bool HasRequestBody { get; private set; }
    internal bool IsHead { get; private set; }

    // ---- Set once per life by the connection when it opens the stream (under its open lock), read by all ----

    private int _streamId;

    /// <summary>This life's id: published after everything else the life starts with (see Start).</summary>
    public int StreamId
    {
        get => Volatile.Read(ref _streamId);
        internal set => Volatile.Write(ref _streamId, value);
    }

    bool IHttp2OutputSource.IsLocallyInitiated => true;

    // ---- Owned by the frame-writer loop ----

    public Http2SendState Send { get; } = new();
    PipeReader IHttp2OutputSource.OutputReader => HasRequestBody ? _requestPipe!.Reader : NoRequestBody.Reader; // none: HEADERS carries END_STREAM
    public List<KeyValuePair<string, string>>? SubmittedHeaders => _headers;
    void IHttp2OutputSource.OnHeadersSent() => _headers = null;
    public List<KeyValuePair<string, string>>? SubmittedTrailers => null;
    Http2Stream.FileOutput? IHttp2OutputSource.PendingFile => null;
    void IHttp2OutputSource.ClearFile(Http2Stream.FileOutput file) { }
    void IHttp2OutputSource.EndFileOutput() { }
    Http2Stream.LentOutput? IHttp2OutputSource.PendingLent => null;
    void IHttp2OutputSource.EndLentOutput() { }

    // ---- Owned by the read loop ----

    internal bool HeadReceived;
    internal bool RemoteEnded;
    internal bool OutputEnded;
    internal long ReceivedBodyLength;
    internal long? DeclaredContentLength;

    // ---- Shared atomics ----

    private int _outputSignaled;
    private ReceiveWindow _window;
    private long _bufferedBytes;
    private volatile bool _responseAbandoned;
    private volatile bool _abortRequested;
    private volatile bool _outputReleased;
    private volatile bool _remoteEndedShared;
    private int _finished; // 1 once the connection stopped counting this stream

    public bool AbortRequested => _abortRequested;
    public bool OutputReleased => _outputReleased;

    public void ClearOutputSignal() => Interlocked.Exchange(ref _outputSignaled, 0);

    internal void SignalOutput()
    {
        if (Interlocked.Exchange(ref _outputSignaled, 1) == 0)
        {
            _connection.EnqueueFromProducer(WriterMessage.StreamOutput(this));
        }
    }

    /// <summary>True the first time: the connection's active-stream count is released exactly once per stream.</summary>
    internal bool TryFinish() => Interlocked.Exchange(ref _finished, 1) == 0;

    // ---- BackendExchange ----

    public override PipeWriter RequestBody => HasRequestBody ? _requestWriter! : NoRequestBody.Writer;
    public override PipeReader ResponseBody => _responseReader;

    // NOTE: one waiter, once (the relay): a one-shot source takes a single continuation, so a second call throws here
    // rather than inside the source.
    // NOTE: the stream itself is what the caller awaits, with or without a token: an async wrapper that registered the
    // token and awaited the head was a state-machine box and one more continuation per call.
    public override ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken)
    {
        if (Interlocked.Exchange(ref _headAwaited, 1) != 0)
        {
            throw new InvalidOperationException("The response head was already read.");
        }

        var head = new ValueTask(this, _head.Version);
        if (!head.IsCompleted && cancellationToken.CanBeCanceled)
        {
            // Set before registering: a token already cancelled runs the abort here, and GetResult must see which token.
            _headToken = cancellationToken;
            _headRegistration = cancellationToken.UnsafeRegister(static state => ((Http2ClientStream)state!).Abort(), this);
        }
        return head;
    }

    /// <summary>Completes the head's wait once: with success, or with <paramref name="error"/>. False when it already was.</summary>
    private bool TrySetHead(Exception? error)
    {
        if (Interlocked.Exchange(ref _headSet, 1) != 0)
        {
            return false;
        }

        if (_onEventLoop)
        {
            // The continuation runs inline where CompleteHead runs: after this event loop's batch, or on the pool when the
            // head completes elsewhere (an abort, a timer).
            _headError = error;
            _connection.Scheduler.Schedule(static s => ((Http2ClientStream)s!).CompleteHead(), this);
        }
        else if (error is null)
        {
            _head.SetResult(true);
        }
        else
        {
            _head.SetException(error);
        }

        return true;
    }

    private void CompleteHead()
    {
        if (_headError is { } error)
        {
            _head.SetException(error);
        }
        else
        {
            _head.SetResult(true);
        }
    }

    void IValueTaskSource.GetResult(short token)
    {
        // NOTE: the head completed, so the abort callback can only be running on another thread (its completion never
        // continues inline); Dispose waits for it, as the async wrapper's using did.
        _headRegistration.Dispose();
        try
        {
            _head.GetResult(token);
        }
        catch (BackendException) when (_headToken.IsCancellationRequested)
        {
            throw new OperationCanceledException(_headToken);
        }
    }

    ValueTaskSourceStatus IValueTaskSource.GetStatus(short token) => _head.GetStatus(token);

    void IValueTaskSource.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _head.OnCompleted(continuation, state, token, flags);

    public override void Abort(uint errorCode = (uint)Http2ErrorCode.Cancel)
    {
        if (_abortRequested)
        {
            return;
        }
        _abortRequested = true;
        var error = new BackendException(BackendFailure.Aborted, "The exchange was aborted.");
        TrySetHead(error);
        // The read loop takes the stream out of its table, fails the response pipe and asks the writer for RST_STREAM
        // (unless the stream already closed both ways: then there is nothing to reset, RFC 9113 §5.1).
        _connection.PostAbandon(this, (Http2ErrorCode)errorCode);
    }

    public override ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return ValueTask.CompletedTask;
        }
        // A relay that stopped early (client gone) without aborting: abandon what is left of the stream.
        if (!_abortRequested && (!_remoteEndedShared || (HasRequestBody && !_requestWriter!.IsCompleted)))
        {
            Abort();
        }
        _responseReader.Complete();
        // NOTE: the relay's last touch: the stream may be reset and reused from here on.
        Release();
        return ValueTask.CompletedTask;
    }

    // ---- Pooling ----

    /// <summary>The read loop is done with this life (it closed or failed): its last touch. <paramref name="normally"/>: END_STREAM both ways.</summary>
    internal void ReleaseFromReadLoop(bool normally)
    {
        _closedNormally = normally;
        Release();
    }

    private void Release()
    {
        if (Interlocked.Decrement(ref _users) == 0)
        {
            _connection.Recycle(this);
        }
    }

    /// <summary>
    /// Readies a life that both users let go of for the next request. False when it cannot be reused: it did not close
    /// normally both ways (a reset, an abort, a failure: a stale cancellation or frame could reach the next life), or a
    /// pipe is not complete at both ends.
    /// </summary>
    /// <remarks>
    /// NOTE: nobody else touches it now. The read loop released it after its last use; the relay released it in
    /// DisposeAsync, after which it must not use the exchange (the contract of BackendExchange); the writer loop stopped
    /// its output before the read loop could close it (OutputEnded), then only looks at its own Send fields for it until
    /// it meets a new StreamId. The writer loop's fields are reset by the writer loop (Http2SendState.Adopt).
    /// </remarks>
    internal bool TryResetForPool()
    {
        // First, so a cancellation whose callback (Abort) could still run is over before the flags are read.
        _headRegistration.Dispose();
        _headRegistration = default;
        // The head must have completed into its source: a completion still deferred to the event loop (TrySetHead) would
        // otherwise land on the next life's.
        if (!_closedNormally || _abortRequested || _outputReleased || _head.GetStatus(_head.Version) != ValueTaskSourceStatus.Succeeded)
        {
            return false;
        }
        try
        {
            if (HasRequestBody)
            {
                _requestPipe!.Reset();
            }
            _responsePipe.Reset();
        }
        catch (InvalidOperationException)
        {
            return false; // an end not completed: never expected for a normally closed stream, but then not reused
        }
        _headToken = default;
        _headError = null;
        _headSet = 0;
        _headAwaited = 0;
        _head.Reset();
        _headers = null;
        HeadReceived = false;
        RemoteEnded = false;
        OutputEnded = false;
        ReceivedBodyLength = 0;
        DeclaredContentLength = null;
        _outputSignaled = 0;
        _bufferedBytes = 0;
        _responseAbandoned = false;
        _remoteEndedShared = false;
        _finished = 0;
        _closedNormally = false;
        _disposed = 0;
        StatusCode = 0;
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        _responseReader.Reset();
        _requestWriter?.Reset();
        return true;
    }

    // ---- Read loop side of the response ----

    internal int ReceiveWindow => _window.Available;

    internal void DebitReceiveWindow(int length) => _window.Debit(length);

    /// <summary>The final response head arrived (read loop). <paramref name="endStream"/>: no body follows.</summary>
    internal void OnResponseHead(int status, List<KeyValuePair<string, string>> fields, bool endStream)
    {
        HeadReceived = true;
        StatusCode = status;
        ResponseHeaders.AddRange(fields);
        if (endStream)
        {
            EndResponse();
        }
        TrySetHead(null);
    }

    /// <summary>Copies DATA into the response pipe (read loop). Returns bytes to credit back at once (nobody reads them any more).</summary>
    internal int DeliverData(in ReadOnlySequence<byte> data)
    {
        if (data.IsEmpty)
        {
            return 0;
        }
        Interlocked.Add(ref _bufferedBytes, data.Length);
        if (_responseAbandoned)
        {
            return (int)Interlocked.Exchange(ref _bufferedBytes, 0);
        }
        try
        {
            foreach (var segment in data)
            {
                _responsePipe.Writer.WriteInBlocks(segment.Span, _connection.StreamBlockSize);
            }
            // No pause threshold: never pending, never blocks the read loop (the window bounds the pipe).
            var flush = _responsePipe.Writer.FlushAsync();
            if (!flush.IsCompletedSuccessfully)
            {
                flush.AsTask().GetAwaiter().GetResult();
            }
        }
        catch (Exception)
        {
            return (int)Interlocked.Exchange(ref _bufferedBytes, 0);
        }
        return _responseAbandoned ? (int)Interlocked.Exchange(ref _bufferedBytes, 0) : 0;
    }

    /// <summary>Trailers arrived (read loop); END_STREAM follows at once.</summary>
    internal void OnTrailers(List<KeyValuePair<string, string>> fields) => ResponseTrailers.AddRange(fields);

    /// <summary>END_STREAM from the backend (read loop): the response body completes (after trailers were stored).</summary>
    internal void EndResponse()
    {
        RemoteEnded = true;
        _remoteEndedShared = true;
        _responsePipe.Writer.Complete();
    }

    /// <summary>The stream failed for the backend or the connection (read loop): every waiter sees <paramref name="error"/>.</summary>
    internal void Fail(BackendException error)
    {
        RemoteEnded = true;
        _remoteEndedShared = true;
        _outputReleased = true;
        TrySetHead(error);
        _responsePipe.Writer.Complete(error);
        if (HasRequestBody)
        {
            _requestPipe!.Writer.CancelPendingFlush(); // a relay waiting for request credit sees the end now
        }
    }

    /// <summary>The read loop released the stream's output (reset, closed): later request writes are dropped.</summary>
    internal void ReleaseOutput()
    {
        _outputReleased = true;
        if (HasRequestBody)
        {
            _requestPipe!.Writer.CancelPendingFlush();
        }
    }

    // ---- Relay side of the response: credit goes back as the relay consumes (RFC 9113 §6.9) ----

    private void OnResponseConsumed(long bytes)
    {
        if (bytes <= 0)
        {
            return;
        }
        Interlocked.Add(ref _bufferedBytes, -bytes);
        _connection.ReturnConnectionCredit((int)bytes);
        if (_remoteEndedShared)
        {
            return;
        }
        var increment = _window.Return((int)bytes);
        if (increment > 0)
        {
            _connection.EnqueueFromProducer(WriterMessage.WindowUpdate(StreamId, increment));
        }
    }

    private void OnResponseAbandoned()
    {
        _responseAbandoned = true;
        var left = Interlocked.Exchange(ref _bufferedBytes, 0);
        if (left > 0)
        {
            _connection.ReturnConnectionCredit((int)left);
        }
    }

    /// <summary>Padding is never read: its stream credit goes back at once (read loop).</summary>
    internal void ReturnPaddingCredit(int bytes)
    {
        if (bytes > 0 && !RemoteEnded)
        {
            var increment = _window.Return(bytes);
            if (increment > 0)
            {
                _connection.EnqueueFromProducer(WriterMessage.WindowUpdate(StreamId, increment));
            }
        }
    }

    /// <summary>The response body the relay reads; consuming returns credit.</summary>
    // Owned by the relay's response flow.
    // NOTE: a read that must wait completes through a Waiter, made on the first wait and kept for the stream: the pipe's
    // read completes into it, it notes the buffer and completes the read it handed out. An async method here kept a
    // state-machine box per waiting read (216 bytes held by every quiet SSE stream), and a unary call whose response
    // is already here when read never waits, so it allocates nothing for this.
    private sealed class ResponseBodyReader(Http2ClientStream stream) : PipeReader
    {
        private ReadOnlySequence<byte> _lastBuffer;
        private Waiter? _waiter;
        private int _completed;

        // The stream's current response pipe (a pooled stream makes a new one when a life needs the other scheduler).
        private PipeReader inner => stream._responsePipe.Reader;

        /// <summary>A new life (TryResetForPool): the waiter is kept, its source reset by its next Wait.</summary>
        public void Reset()
        {
            _lastBuffer = default;
            _completed = 0;
        }

        public override void AdvanceTo(SequencePosition consumed) => AdvanceTo(consumed, consumed);

        public override void AdvanceTo(SequencePosition consumed, SequencePosition examined)
        {
            var bytes = _lastBuffer.Slice(_lastBuffer.Start, consumed).Length;
            _lastBuffer = default;
            inner.AdvanceTo(consumed, examined);
            stream.OnResponseConsumed(bytes);
        }

        public override void CancelPendingRead() => inner.CancelPendingRead();

        public override void Complete(Exception? exception = null)
        {
            if (Interlocked.Exchange(ref _completed, 1) == 1)
            {
                return;
            }
            stream._responseAbandoned = true;
            inner.Complete(exception);
            stream.OnResponseAbandoned();
        }

        public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
        {
            var read = inner.ReadAsync(cancellationToken);
            // NOTE: IsCompleted first: a read still pending when IsCompletedSuccessfully is asked may complete before the
            // next question, and would then be handed back without its buffer noted.
            if (read.IsCompleted)
            {
                if (!read.IsCompletedSuccessfully)
                {
                    return read; // failed or cancelled: nothing to note
                }
                var result = read.Result;
                _lastBuffer = result.Buffer;
                return new ValueTask<ReadResult>(result);
            }
            return (_waiter ??= new Waiter(this)).Wait(read);
        }

        public override bool TryRead(out ReadResult result)
        {
            if (inner.TryRead(out result))
            {
                _lastBuffer = result.Buffer;
                return true;
            }
            return false;
        }

        private sealed class Waiter : IValueTaskSource<ReadResult>
        {
            private readonly ResponseBodyReader _reader;
            private readonly Action _onInnerReadCompleted;
            private ManualResetValueTaskSourceCore<ReadResult> _core;
            private ConfiguredValueTaskAwaitable<ReadResult>.ConfiguredValueTaskAwaiter _innerRead;

            public Waiter(ResponseBodyReader reader)
            {
                _reader = reader;
                _onInnerReadCompleted = OnInnerReadCompleted;
            }

            public ValueTask<ReadResult> Wait(ValueTask<ReadResult> read)
            {
                _core.Reset();
                _innerRead = read.ConfigureAwait(false).GetAwaiter();
                _innerRead.UnsafeOnCompleted(_onInnerReadCompleted);
                return new ValueTask<ReadResult>(this, _core.Version);
            }

            private void OnInnerReadCompleted()
            {
                ReadResult result;
                try
                {
                    result = _innerRead.GetResult();
                }
                catch (Exception ex)
                {
                    _innerRead = default;
                    _core.SetException(ex);
                    return;
                }
                _innerRead = default;
                _reader._lastBuffer = result.Buffer;
                _core.SetResult(result);
            }

            public ReadResult GetResult(short token) => _core.GetResult(token);

            public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

            public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
                => _core.OnCompleted(continuation, state, token, flags);
        }
    }

    /// <summary>The request body the relay writes; a flush hands the bytes to the writer loop and waits for backpressure.</summary>
    // Owned by the relay's request flow.
    private sealed class RequestBodyWriter(Http2ClientStream stream, PipeWriter inner) : PipeWriter
    {
        private static readonly FlushResult Ended = new(isCanceled: false, isCompleted: true);
        private byte[]? _discard;
        private bool _lastBufferDiscarded;
        private int _completed;

        /// <summary>A new life (TryResetForPool); the discard buffer is kept.</summary>
        public void Reset()
        {
            _lastBufferDiscarded = false;
            _completed = 0;
        }

        public bool IsCompleted => Volatile.Read(ref _completed) == 1 || !stream.HasRequestBody;

        private bool OutputClosed => stream._abortRequested || stream._outputReleased;

        public override void Advance(int bytes)
        {
            if (!_lastBufferDiscarded)
            {
                inner.Advance(bytes);
            }
        }

        public override Memory<byte> GetMemory(int sizeHint = 0) => OutputClosed ? Discard(sizeHint) : Keep(inner.GetMemory(sizeHint));

        public override Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;

        private Memory<byte> Keep(Memory<byte> memory)
        {
            _lastBufferDiscarded = false;
            return memory;
        }

        private Memory<byte> Discard(int sizeHint)
        {
            _lastBufferDiscarded = true;
            var size = Math.Max(sizeHint, 4096);
            if (_discard is null || _discard.Length < size)
            {
                _discard = new byte[size];
            }
            return _discard;
        }

        public override void CancelPendingFlush() => inner.CancelPendingFlush();

        public override void Complete(Exception? exception = null)
        {
            if (Interlocked.Exchange(ref _completed, 1) == 1 || !stream.HasRequestBody)
            {
                return;
            }
            if (exception is not null)
            {
                stream.Abort();
                return;
            }
            // Completing the pipe tells the writer loop to end the stream (END_STREAM on the last DATA).
            inner.Complete();
            stream.SignalOutput();
        }

        public override ValueTask CompleteAsync(Exception? exception = null)
        {
            Complete(exception);
            return ValueTask.CompletedTask;
        }

        public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default)
        {
            if (OutputClosed)
            {
                return cancellationToken.IsCancellationRequested ? ValueTask.FromCanceled<FlushResult>(cancellationToken) : new ValueTask<FlushResult>(Ended);
            }
            var flush = inner.FlushAsync(cancellationToken);
            stream.SignalOutput();
            if (flush.IsCompletedSuccessfully)
            {
                return new ValueTask<FlushResult>(Translate(flush.Result));
            }
            return AwaitFlushAsync(flush);
        }

        [AsyncMethodBuilder(typeof(PoolingAsyncValueTaskMethodBuilder<>))]
        private async ValueTask<FlushResult> AwaitFlushAsync(ValueTask<FlushResult> flush) => Translate(await flush);

        private FlushResult Translate(FlushResult result) => result.IsCanceled && stream._outputReleased ? Ended : result;
    }

    // Stateless, shared by every stream whose request has no body.
    /// <summary>The request body of a request declared without one: read, it is complete and empty; written, it refuses.</summary>
    private static class NoRequestBody
    {
        public static readonly PipeReader Reader = new CompletedReader();
        public static readonly PipeWriter Writer = new RefusingWriter();

        private sealed class CompletedReader : PipeReader
        {
            private static readonly ReadResult Done = new(ReadOnlySequence<byte>.Empty, isCanceled: false, isCompleted: true);

            public override bool TryRead(out ReadResult result)
            {
                result = Done;
                return true;
            }

            public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default) => new(Done);
            public override void AdvanceTo(SequencePosition consumed) { }
            public override void AdvanceTo(SequencePosition consumed, SequencePosition examined) { }
            public override void CancelPendingRead() { }
            public override void Complete(Exception? exception = null) { }
        }

        private sealed class RefusingWriter : PipeWriter
        {
            private static readonly FlushResult Ended = new(isCanceled: false, isCompleted: true);

            public override void Advance(int bytes) => throw Refused();
            public override Memory<byte> GetMemory(int sizeHint = 0) => throw Refused();
            public override Span<byte> GetSpan(int sizeHint = 0) => throw Refused();
            public override void CancelPendingFlush() { }
            public override void Complete(Exception? exception = null) { }
            public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default) => new(Ended);

            private static InvalidOperationException Refused() =>
                new("The request was sent without a body (BackendRequest.HasBody is false): nothing can be written to it.");
        }
    }
}
