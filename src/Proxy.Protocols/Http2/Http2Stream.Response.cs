using System.Buffers;
using System.Globalization;
using System.Runtime.CompilerServices;
using Microsoft.Win32.SafeHandles;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

// App side of the stream: the response it builds and hands to the frame-writer loop.
internal sealed partial class Http2Stream
{
    public override ValueTask StartResponseAsync(CancellationToken cancellationToken = default)
    {
        StartResponseCore();
        return ValueTask.CompletedTask;
    }

    /// <summary>Snapshots status + headers once and schedules the stream: HEADERS leave without waiting for body bytes.</summary>
    private void StartResponseCore()
    {
        if (Volatile.Read(ref _responseStarted) == 1)
        {
            return;
        }
        // The pooled stream's spare list when it has one (taken, so a second caller racing here builds its own).
        var fields = Interlocked.Exchange(ref _spareHeaderList, null) ?? new List<KeyValuePair<string, string>>(ResponseHeaders.Count + 1);
        fields.Add(new(":status", StatusCode.ToString(CultureInfo.InvariantCulture)));
        // Throws InvalidOperationException for a field we must not send; the response has not started then,
        // so the app (or the engine, with a 500) can still answer.
        AddResponseFields(fields, ResponseHeaders);
        if (Interlocked.Exchange(ref _responseStarted, 1) == 1)
        {
            return;
        }
        _submittedHeaders = fields;
        SignalOutput();
    }

    public override async ValueTask CompleteAsync()
    {
        if (Volatile.Read(ref _responseCompleted) == 1)
        {
            return;
        }
        // Validate everything before marking the response complete: if a field is invalid the app gets the
        // exception and the engine can still end the stream (500 or RST_STREAM) afterwards.
        StartResponseCore();
        List<KeyValuePair<string, string>>? trailers = null;
        if (ResponseTrailers.Count > 0)
        {
            trailers = Interlocked.Exchange(ref _spareTrailerList, null) ?? new List<KeyValuePair<string, string>>(ResponseTrailers.Count);
            AddResponseFields(trailers, ResponseTrailers);
        }
        if (Interlocked.Exchange(ref _responseCompleted, 1) == 1)
        {
            return;
        }
        if (trailers is { Count: > 0 })
        {
            _submittedTrailers = trailers;
        }
        // Completing the pipe publishes the trailers to the writer loop (the pipe's lock orders them).
        await _responsePipe.Writer.CompleteAsync();
        SignalOutput();
    }

    public override void Abort(uint errorCode)
    {
        if (_abortRequested)
        {
            return;
        }
        // The writer loop checks this flag before touching the stream, so it never ends the stream
        // normally between this call and the RST_STREAM message.
        _abortRequested = true;
        Interlocked.Exchange(ref _responseCompleted, 1);
        EndFileOutput();
        EndLentOutput();
        // NOTE: the response pipe stays open: once the writer loop stops the stream it completes the
        // reader, so later app writes are dropped and flushes report IsCompleted instead of throwing.
        _connection.EnqueueFromProducer(WriterMessage.RstStream(StreamId, this, (Http2ErrorCode)errorCode, isControl: false, skipIfEnded: true));
        try
        {
            _abortedCts.Cancel();
        }
        catch (AggregateException)
        {
            // An app callback threw; the abort still stands.
        }
    }

    /// <summary>
    /// The writer loop reads the file straight into DATA frames in the connection's output, one frame per turn within
    /// the windows, until the range is sent: the bytes are copied once (file to output, as for HTTP/1.1) instead of
    /// file to response pipe to output, and the app and the writer loop do not hand off every 64 KiB. On this
    /// machine that hand-off and copy made a 10 MB static file over h2c cost 1.3-1.7x its HTTP/1.1 CPU.
    /// </summary>
    /// <remarks>
    /// NOTE: the writer loop reads synchronously, so a read that waits on a disk (not the page cache) holds up the
    /// connection's other streams for that read; nginx's sendfile has the same trade. Never on an event loop: a writer
    /// pass that reaches a file there moves to the thread pool first (other connections share that thread). The handle stays the caller's:
    /// the loop is done with it when this returns normally; after a cancellation or a reset it may still be inside
    /// one read, which a closed SafeFileHandle turns into an exception the loop absorbs.
    /// </remarks>
    public override async ValueTask SendFileAsync(SafeFileHandle file, long offset, long count, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(file);
        ArgumentOutOfRangeException.ThrowIfNegative(offset);
        ArgumentOutOfRangeException.ThrowIfNegative(count);
        cancellationToken.ThrowIfCancellationRequested();
        // The bytes written before go first: the flush starts the response and publishes them to the writer loop.
        var flush = await _responseBodyWriter.FlushAsync(cancellationToken);
        if (flush.IsCanceled)
        {
            throw new OperationCanceledException("The response flush was canceled.");
        }
        if (flush.IsCompleted || count == 0)
        {
            return; // the client is gone, or nothing to send
        }
        var output = new FileOutput(file, offset, count);
        Interlocked.Exchange(ref _fileOutput, output); // a full fence: the check below cannot move above it
        if (_fileOutputClosed)
        {
            output.End(); // the stream ended while handing over: nobody else will end it
        }
        using var registration = cancellationToken.UnsafeRegister(static (state, token) =>
        {
            var stream = (Http2Stream)state!;
            if (Volatile.Read(ref stream._fileOutput) is { } pending && pending.TryCancel(token))
            {
                stream.SignalOutput(); // let the writer loop drop it now
            }
        }, this);
        SignalOutput();
        await output.Completion;
    }

    /// <summary>
    /// The stream will send nothing more (app abort, reset or connection closing on the read loop, the writer loop
    /// stopping it): ends a pending <see cref="SendFileAsync"/> as "client gone", and any later one at once.
    /// </summary>
    public void EndFileOutput()
    {
        _fileOutputClosed = true;
        if (Interlocked.Exchange(ref _fileOutput, null) is { } pending)
        {
            pending.End();
        }
    }

    /// <summary>Writer loop: the file being sent, if any and not already ended.</summary>
    public FileOutput? PendingFile => Volatile.Read(ref _fileOutput);

    /// <summary>Writer loop: the file is done (sent, failed, cancelled); clears it unless the app already moved on.</summary>
    public void ClearFile(FileOutput file) => Interlocked.CompareExchange(ref _fileOutput, null, file);

    /// <summary>
    /// A file range handed from the app to the writer loop. Position and Remaining are the writer loop's; the
    /// completion is set once, by the loop (sent, shrank, failed) or by the app's side (cancelled, stream ended).
    /// </summary>
    internal sealed class FileOutput(SafeFileHandle handle, long offset, long count)
    {
        // Continuations run on the thread pool: never app code on the writer loop.
        private readonly TaskCompletionSource _completion = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public SafeFileHandle Handle { get; } = handle;
        public long Position { get; set; } = offset;
        public long Remaining { get; set; } = count;
        public Task Completion => _completion.Task;
        public bool IsEnded => _completion.Task.IsCompleted;

        public void End() => _completion.TrySetResult();
        public void Fail(Exception error) => _completion.TrySetException(error);
        public bool TryCancel(CancellationToken token) => _completion.TrySetCanceled(token);
    }

    /// <summary>Schedules this stream with the writer loop unless it is already scheduled.</summary>
    internal void SignalOutput()
    {
        if (Interlocked.Exchange(ref _outputSignaled, 1) == 0)
        {
            _connection.EnqueueFromProducer(WriterMessage.StreamOutput(this));
        }
    }

    /// <summary>Writer loop: called before it looks at the stream's output, so any later flush signals again.</summary>
    /// <remarks>
    /// NOTE: a full fence, so the loop's reads of the stream's output after it (pipe, <see cref="PendingFile"/>) cannot
    /// move before it: a producer that found the flag still set must have its output seen by this turn.
    /// </remarks>
    public void ClearOutputSignal() => Interlocked.Exchange(ref _outputSignaled, 0);

    /// <summary>
    /// Lowercases names and drops connection-specific fields the app may have set: RFC 9113 §8.2.2 forbids
    /// them in HTTP/2 ("An endpoint MUST NOT generate an HTTP/2 message containing connection-specific header fields").
    /// Throws <see cref="InvalidOperationException"/> for a field that is not valid (RFC 9113 §8.2.1: an endpoint
    /// MUST NOT generate invalid field names or values), on the app's thread, so nothing bad reaches the
    /// connection's HPACK encoder.
    /// </summary>
    private static void AddResponseFields(List<KeyValuePair<string, string>> target, HttpHeaderList source)
    {
        foreach (var (name, value) in source)
        {
            if (name.Length == 0 || name[0] == ':')
            {
                continue;
            }
            ValidateField(name, value);
            var lower = KnownHeaderStrings.LowercaseName(name);
            if (HttpFieldRules.IsConnectionSpecificInResponse(lower))
            {
                continue;
            }
            target.Add(new(lower, value));
        }
    }

    /// <summary>
    /// Names must be tokens (RFC 9110 §5.1; uppercase is lowercased later, RFC 9113 §8.2); values must not
    /// contain NUL, CR or LF (RFC 9113 §8.2.1) and must fit in one octet per character (HPACK carries octets).
    /// </summary>
    private static void ValidateField(string name, string value)
    {
        if (!HttpFieldRules.IsToken(name))
        {
            throw new InvalidOperationException($"Invalid response header name '{name}': HTTP/2 field names are tokens (RFC 9110 §5.1).");
        }
        if (!HttpFieldRules.IsSendableValue(value))
        {
            throw new InvalidOperationException(
                $"Invalid value for response header '{name}': NUL, CR, LF and characters above U+00FF are not allowed (RFC 9113 §8.2.1).");
        }
    }

    /// <summary>The request body the app reads; counts consumed bytes to return flow-control credit.</summary>
    // Owned by the app (one reader at a time, as for any PipeReader).
    private sealed class RequestBodyReader : PipeReader
    {
        private readonly Http2Stream _stream;
        private PipeReader _inner = EmptyBody.Instance;
        private ReadOnlySequence<byte> _lastBuffer;
        private int _completed;

        public RequestBodyReader(Http2Stream stream) => _stream = stream;

        /// <summary>Read loop, before dispatch: this request's body pipe, or null for a request without a body.</summary>
        public void Attach(PipeReader? inner) => _inner = inner ?? EmptyBody.Instance;

        /// <summary>Pooled stream: readies the reader for the next request (its pipe was reset).</summary>
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
            _inner.AdvanceTo(consumed, examined);
            _stream.OnRequestBodyConsumed(bytes);
        }

        public override void CancelPendingRead() => _inner.CancelPendingRead();

        public override void Complete(Exception? exception = null)
        {
            if (Interlocked.Exchange(ref _completed, 1) == 1)
            {
                return;
            }
            // Flag first: the read loop checks it before writing into the pipe this completes.
            _stream.MarkRequestBodyAbandoned();
            _inner.Complete(exception);
            _stream.OnRequestBodyAbandoned();
        }

        // NOTE: not an async method: a read the pipe completes at once (a body that is here already, as a small
        // request's is) returns without a state machine; only a read that waits goes through ReadPendingAsync.
        public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
        {
            ValueTask<ReadResult> read;
            try
            {
                read = _inner.ReadAsync(cancellationToken);
            }
            catch (Exception ex)
            {
                return ValueTask.FromException<ReadResult>(ex); // as an async method would: in the task, not thrown
            }
            if (!read.IsCompletedSuccessfully)
            {
                return ReadPendingAsync(read);
            }
            var result = read.Result;
            _lastBuffer = result.Buffer;
            return new ValueTask<ReadResult>(result);
        }

        [AsyncMethodBuilder(typeof(PoolingAsyncValueTaskMethodBuilder<>))]
        private async ValueTask<ReadResult> ReadPendingAsync(ValueTask<ReadResult> read)
        {
            var result = await read;
            _lastBuffer = result.Buffer;
            return result;
        }

        public override bool TryRead(out ReadResult result)
        {
            if (_inner.TryRead(out result))
            {
                _lastBuffer = result.Buffer;
                return true;
            }
            return false;
        }
    }

    /// <summary>The body of a request that ended with its headers: always read as complete and empty.</summary>
    // Stateless: shared by every stream.
    private sealed class EmptyBody : PipeReader
    {
        public static readonly EmptyBody Instance = new();
        private static readonly ReadResult Ended = new(ReadOnlySequence<byte>.Empty, isCanceled: false, isCompleted: true);

        public override void AdvanceTo(SequencePosition consumed)
        {
        }

        public override void AdvanceTo(SequencePosition consumed, SequencePosition examined)
        {
        }

        public override void CancelPendingRead()
        {
        }

        public override void Complete(Exception? exception = null)
        {
        }

        public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
            => cancellationToken.IsCancellationRequested ? ValueTask.FromCanceled<ReadResult>(cancellationToken) : new(Ended);

        public override bool TryRead(out ReadResult result)
        {
            result = Ended;
            return true;
        }
    }

    /// <summary>The stream pool's largest block (16 KiB with <c>BlockMemoryPool.StreamDefault</c>).</summary>
    public override int ResponseBodyBlockSize => _connection.StreamBlockSize;

    /// <summary>The response body the app writes; a flush hands the bytes to the writer loop and waits for backpressure.</summary>
    // Owned by the app (one writer at a time, as for any PipeWriter).
    private sealed class ResponseBodyWriter : PipeWriter
    {
        private static readonly FlushResult Ended = new(isCanceled: false, isCompleted: true);
        private readonly Http2Stream _stream;
        private readonly PipeWriter _inner;
        private byte[]? _discard;
        private bool _lastBufferDiscarded;
        // Bytes left in the block the pipe last gave this writer, as far as it knows (0: none, or unknown).
        private int _blockLeft;

        public ResponseBodyWriter(Http2Stream stream, PipeWriter inner)
        {
            _stream = stream;
            _inner = inner;
        }

        /// <summary>Pooled stream: readies the writer for the next response (its pipe was reset).</summary>
        public void Reset()
        {
            _lastBufferDiscarded = false;
            _blockLeft = 0;
        }

        /// <summary>
        /// What a write with no size hint gets when it needs a new block: 1 KiB, not the pipe's minimum segment.
        /// </summary>
        /// <remarks>
        /// NOTE: the stream pipes' minimum segment is 256 bytes (BlockMemoryPool.StreamDefault's smallest block), so that
        /// the relay's and the read loop's writes, which say what they write, put an SSE event in a 256-byte block. A
        /// writer that says nothing (GetSpan(), BuffersExtensions.Write, the server moving bytes held before the response
        /// started) would get 256 bytes for every block: here it asks for 1 KiB when the last block is used up, and for
        /// whatever is left of it otherwise, so a run of small writes still fills each block.
        /// </remarks>
        private const int NoHintBlockSize = 1024;

        private Memory<byte> Rent(int sizeHint)
        {
            var memory = _inner.GetMemory(sizeHint > 0 ? sizeHint : _blockLeft > 0 ? 1 : NoHintBlockSize);
            _blockLeft = memory.Length;
            return memory;
        }

        /// <summary>A reset or closed stream takes no more output.</summary>
        private bool OutputClosed => _stream._abortRequested || _stream._outputReleased || _stream._abortedCts.IsCancellationRequested;

        public override bool CanGetUnflushedBytes => _inner.CanGetUnflushedBytes;
        public override long UnflushedBytes => _inner.UnflushedBytes;

        public override void Advance(int bytes)
        {
            if (!_lastBufferDiscarded)
            {
                _inner.Advance(bytes);
                _blockLeft = Math.Max(0, _blockLeft - bytes);
            }
        }

        public override Memory<byte> GetMemory(int sizeHint = 0)
            => OutputClosed ? Discard(sizeHint) : Keep(Rent(sizeHint));

        public override Span<byte> GetSpan(int sizeHint = 0)
            => OutputClosed ? Discard(sizeHint).Span : Keep(Rent(sizeHint)).Span;

        private Memory<byte> Keep(Memory<byte> memory)
        {
            _lastBufferDiscarded = false;
            return memory;
        }

        /// <summary>Writes after the stream closed go to a scratch buffer, so an app that ignores IsCompleted cannot grow memory.</summary>
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

        public override void CancelPendingFlush() => _inner.CancelPendingFlush();

        /// <summary>A write through <c>Response.Body</c> (a Stream) or <c>PipeWriter.WriteAsync</c>: copied in blocks, then flushed.</summary>
        /// <remarks>
        /// NOTE: PipeWriter's own WriteAsync (BuffersExtensions.Write) asks for every block with no size hint: a 64 KiB
        /// Stream copy went into 1 KiB blocks (NoHintBlockSize), and into the pipe's 256-byte minimum before it. Here
        /// each block is asked for with what is left (StreamPipeWrites.WriteInBlocks), as the read loop and the relay do:
        /// 16 KiB blocks while that much is left.
        /// </remarks>
        public override ValueTask<FlushResult> WriteAsync(ReadOnlyMemory<byte> source, CancellationToken cancellationToken = default)
        {
            if (!OutputClosed)
            {
                _lastBufferDiscarded = false;
                _inner.WriteInBlocks(source.Span, _stream._connection.StreamBlockSize);
                _blockLeft = 0; // unknown: the next write with no hint asks for a whole small block
            }
            return FlushAsync(cancellationToken);
        }

        public override void Complete(Exception? exception = null)
        {
            if (exception is not null)
            {
                _stream.Abort((uint)Http2ErrorCode.InternalError);
                return;
            }
            _stream.CompleteAsync().AsTask().GetAwaiter().GetResult();
        }

        public override ValueTask CompleteAsync(Exception? exception = null)
        {
            if (exception is not null)
            {
                _stream.Abort((uint)Http2ErrorCode.InternalError);
                return ValueTask.CompletedTask;
            }
            return _stream.CompleteAsync();
        }

        public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default)
        {
            // A reset stream takes no more output: report completion instead of queueing bytes nobody will send.
            if (OutputClosed)
            {
                // NOTE: like any PipeWriter, a cancelled token wins over a result: a streaming handler that
                // passes RequestAborted but ignores IsCompleted must end here, not spin on completed flushes.
                return cancellationToken.IsCancellationRequested
                    ? ValueTask.FromCanceled<FlushResult>(cancellationToken)
                    : new ValueTask<FlushResult>(Ended);
            }
            _stream.StartResponseCore();
            // Publish the bytes first, then signal: the writer loop must find them when it looks.
            var flush = _inner.FlushAsync(cancellationToken);
            _stream.SignalOutput();
            if (flush.IsCompletedSuccessfully)
            {
                return new ValueTask<FlushResult>(Translate(flush.Result));
            }
            return AwaitFlushAsync(flush);
        }

        [AsyncMethodBuilder(typeof(PoolingAsyncValueTaskMethodBuilder<>))]
        private async ValueTask<FlushResult> AwaitFlushAsync(ValueTask<FlushResult> flush) => Translate(await flush);

        /// <summary>The read loop cancels the pending flush when the stream is gone: the app sees the stream ended.</summary>
        private FlushResult Translate(FlushResult result) => result.IsCanceled && _stream._outputReleased ? Ended : result;
    }
}
