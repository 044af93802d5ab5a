using System.Runtime.CompilerServices;
using System.Text;
using System.Threading.Tasks.Sources;
using Proxy.Codecs.Http1;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Http1.Client;

/// <summary>
/// One request/response exchange on an <see cref="Http1ClientConnection"/>. The request side
/// (<see cref="Http1ClientRequestBody"/>) writes the transport's output, the response side (the head here,
/// <see cref="Http1ClientResponseBody"/> after it) reads the transport's input; they share only the outcome flags
/// below. The first failure of the exchange wins and is sticky: every later read, write or flush on either side throws
/// it, the connection is closed at dispose and nothing more is parsed or relayed from it. A failed request write is
/// the one exception: it fails the request side only (see <see cref="FlushRequestAsync"/>).
/// </summary>
// Owned by the relay: one flow on the request side, one on the response side; Abort and Fail from any thread.
internal sealed class Http1ClientExchange : BackendExchange, IValueTaskSource
{
    /// <summary>1xx responses skipped before the final one; more is a protocol error.</summary>
    internal const int MaxInterimResponses = 16;

    private readonly Http1ClientConnection _connection;
    private readonly IDuplexPipe _transport;
    private bool _isHeadRequest;
    private readonly Http1ClientRequestBody _requestBody;
    private readonly Http1ClientResponseBody _responseBody;
    private readonly ResponseFieldSink _headSink;
    private BackendException? _failure;
    private BackendException? _requestFailure;
    private volatile bool _requestComplete;
    private volatile bool _responseComplete;
    private volatile bool _responseStarted;
    private bool _keepAlive;
    private Task? _pendingFlush;
    private int _disposed;
    // The response head's wait (ReadResponseHeadAsync): one source kept with the exchange, the read it waits on, the
    // continuation (made once), and the caller's cancellation. Owned by the response side.
    private ManualResetValueTaskSourceCore<bool> _head;
    private ConfiguredValueTaskAwaitable<ReadResult>.ConfiguredValueTaskAwaiter _headRead;
    private Action? _onHeadRead;
    private CancellationTokenRegistration _headRegistration;
    private CancellationToken _headToken;
    private bool _headWaiting;
    private int _interim;

    public Http1ClientExchange(Http1ClientConnection connection, BackendRequest request, Http1RequestHeadWriter.BodyFraming framing)
    {
        _connection = connection;
        _transport = connection.Transport;
        _isHeadRequest = string.Equals(request.Method, "HEAD", StringComparison.Ordinal);
        _requestBody = new Http1ClientRequestBody(this, _transport.Output, framing, request.ContentLength ?? 0);
        _responseBody = new Http1ClientResponseBody(this, _transport.Input, connection.Options);
        _headSink = new ResponseFieldSink(ResponseHeaders);
    }

    /// <summary>
    /// Readies an exchange that ended cleanly for the next request on its connection (the connection's lock is held, no
    /// flow of the last request touches it any more), its response field list emptied for the next response.
    /// </summary>
    internal void Reuse(BackendRequest request, Http1RequestHeadWriter.BodyFraming framing)
    {
        _isHeadRequest = string.Equals(request.Method, "HEAD", StringComparison.Ordinal);
        _failure = null;
        _requestFailure = null;
        _requestComplete = false;
        _responseComplete = false;
        _responseStarted = false;
        _keepAlive = false;
        _pendingFlush = null;
        _headToken = default;
        StatusCode = 0;
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        _requestBody.Reuse(framing, request.ContentLength ?? 0);
        _responseBody.Reuse();
        Volatile.Write(ref _disposed, 0);
    }

    public override PipeWriter RequestBody => _requestBody;

    public override PipeReader ResponseBody => _responseBody;

    /// <summary>The first failure of the exchange, or null.</summary>
    internal BackendException? Failure => Volatile.Read(ref _failure);

    /// <summary>True once writing the request failed (the response side may still finish).</summary>
    internal bool RequestFailed => Volatile.Read(ref _requestFailure) is not null;

    /// <summary>True once the whole request (head and body, terminator included) was flushed.</summary>
    internal bool RequestComplete => _requestComplete;

    /// <summary>True once the final response's body was read to its end (and its trailers).</summary>
    internal bool ResponseComplete => _responseComplete;

    /// <summary>
    /// Flushes what the request side wrote; the one place that maps transport failures on the output side.
    /// NOTE: a failed write fails the request side only. A backend may answer and close before it read the whole
    /// request (RFC 9112 §9.5 expects a client to watch for that), so the response side goes on reading what the
    /// backend sent, and fails on its own if the response is cut short. The connection is not reused either way.
    /// </summary>
    internal async ValueTask<FlushResult> FlushRequestAsync(CancellationToken cancellationToken)
    {
        ThrowIfRequestFailed();
        FlushResult result;
        try
        {
            result = await _transport.Output.FlushAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            Abort();
            throw;
        }
        catch (Exception ex) when (ex is not BackendException)
        {
            throw FailRequest("Writing the request to the backend failed.", ex);
        }
        ThrowIfFailed();
        if (result.IsCompleted)
        {
            throw FailRequest("The backend connection closed before the request was sent.");
        }
        if (_requestBody.IsFullySent)
        {
            _requestComplete = true;
        }
        return result;
    }

    /// <summary>Records a complete-time flush that did not finish synchronously; DisposeAsync awaits it.</summary>
    internal void TrackPendingFlush(Task flush) => _pendingFlush = flush;

    // NOTE: the head is read by this exchange as its own value-task source, not by an async method: the exchange is kept
    // with its connection between requests, so the wait (its source, its continuation delegate) costs nothing per
    // request, where the async method's state-machine box was 188 bytes of every forwarded HTTP/1.1 request. One read
    // of the transport per wait either way; interim responses and a head split over reads loop in the same wait.
    public override ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken)
    {
        if (_responseStarted)
        {
            throw new InvalidOperationException("The response head was already read.");
        }
        _responseStarted = true;
        _headToken = cancellationToken;
        _headRegistration = cancellationToken.CanBeCanceled
            ? cancellationToken.UnsafeRegister(static state => ((Http1ClientExchange)state!).Abort(), this)
            : default;
        _headSink.Start(ResponseHeaders);
        _interim = 0;
        try
        {
            if (ReadHeadUntilWait())
            {
                EndHeadWait();
                return default;
            }
            return new ValueTask(this, _head.Version);
        }
        catch (Exception ex)
        {
            EndHeadWait();
            return ValueTask.FromException(HeadFailure(ex));
        }
    }

    /// <summary>
    /// Reads and parses until the final head is in (true) or a read has to wait (false: the wait's continuation was
    /// registered and <see cref="_head"/> readied for it). Throws what the head fails with.
    /// </summary>
    private bool ReadHeadUntilWait()
    {
        var input = _transport.Input;
        while (true)
        {
            ThrowIfFailed();
            ValueTask<ReadResult> read;
            try
            {
                read = input.ReadAsync();
            }
            catch (Exception ex) when (ex is not BackendException)
            {
                throw Fail(BackendFailure.ConnectionLost, "Reading the response from the backend failed.", ex);
            }
            if (!read.IsCompleted)
            {
                if (!_headWaiting)
                {
                    _headWaiting = true;
                    _head.Reset();
                }
                _headRead = read.ConfigureAwait(false).GetAwaiter();
                _headRead.UnsafeOnCompleted(_onHeadRead ??= OnHeadRead);
                return false;
            }
            if (ProcessHeadRead(ReadResultOf(read.ConfigureAwait(false).GetAwaiter())))
            {
                return true;
            }
        }
    }

    /// <summary>The wait's read completed: go on reading, and complete the head's source once the head is in or failed.</summary>
    private void OnHeadRead()
    {
        var read = _headRead;
        _headRead = default;
        try
        {
            if (!ProcessHeadRead(ReadResultOf(read)) && !ReadHeadUntilWait())
            {
                return; // waits again, in the same wait
            }
        }
        catch (Exception ex)
        {
            EndHeadWait();
            _head.SetException(HeadFailure(ex));
            return;
        }
        EndHeadWait();
        _head.SetResult(true);
    }

    private ReadResult ReadResultOf(ConfiguredValueTaskAwaitable<ReadResult>.ConfiguredValueTaskAwaiter read)
    {
        try
        {
            return read.GetResult();
        }
        catch (Exception ex) when (ex is not BackendException)
        {
            throw Fail(BackendFailure.ConnectionLost, "Reading the response from the backend failed.", ex);
        }
    }

    /// <summary>One read's bytes: true once the final head was parsed (the body starts after it), false for more input.</summary>
    private bool ProcessHeadRead(ReadResult result)
    {
        var input = _transport.Input;
        if (Failure is not null)
        {
            input.AdvanceTo(result.Buffer.Start);
            ThrowIfFailed();
        }

        var buffer = result.Buffer;
        bool complete;
        Http1ResponseHead head;
        SequencePosition consumed;
        try
        {
            complete = Http1ResponseParser.TryParseHead(buffer, _headSink, _connection.Options.Limits, _isHeadRequest, out head, out consumed);
        }
        catch (Http1ParseException ex)
        {
            input.AdvanceTo(buffer.Start);
            throw Fail(BackendFailure.ProtocolError, $"Invalid response head from the backend: {ex.Reason}.");
        }
        if (!complete)
        {
            input.AdvanceTo(buffer.Start, buffer.End);
            if (result.IsCompleted)
            {
                throw Fail(BackendFailure.ConnectionLost, buffer.IsEmpty
                    ? "The backend closed the connection without sending a response."
                    : "The backend closed the connection in the middle of the response head.");
            }
            return false;
        }
        input.AdvanceTo(consumed);

        if (head.StatusCode == 101)
        {
            // We never send Upgrade (RFC 9110 §7.8): a switch to another protocol is not ours to relay.
            throw Fail(BackendFailure.ProtocolError, "The backend answered 101 Switching Protocols to a request without Upgrade.");
        }
        if (head.StatusCode < 200)
        {
            // RFC 9110 §15.2: "A client MUST be able to parse one or more 1xx responses received prior to a final
            // response, even if the client does not expect one." Interim responses are not relayed; their number
            // is bounded, so a backend cannot keep us parsing without ever answering.
            if (++_interim > MaxInterimResponses)
            {
                throw Fail(BackendFailure.ProtocolError, $"The backend sent more than {MaxInterimResponses} interim (1xx) responses.");
            }
            ResponseHeaders.Clear();
            _headSink.Reset();
            return false;
        }

        _headSink.RemoveConnectionOptions();
        StatusCode = head.StatusCode;
        _keepAlive = head.KeepAlive;
        _responseBody.Start(head);
        return true;
    }

    /// <summary>The head's wait is over (in, or failed): the cancellation no longer aborts the exchange through it.</summary>
    private void EndHeadWait()
    {
        _headWaiting = false;
        _headRegistration.Dispose();
        _headRegistration = default;
    }

    /// <summary>A failure of the head as its awaiter sees it: a cancelled caller gets its cancellation, not the abort it caused.</summary>
    private Exception HeadFailure(Exception failure) =>
        failure is BackendException && _headToken.IsCancellationRequested ? new OperationCanceledException(_headToken) : failure;

    void IValueTaskSource.GetResult(short token) => _head.GetResult(token);

    ValueTaskSourceStatus IValueTaskSource.GetStatus(short token) => _head.GetStatus(token);

    void IValueTaskSource.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _head.OnCompleted(continuation, state, token, flags);

    /// <summary>
    /// <see cref="ReadInputAsync"/> for bytes already buffered: true with them, false when a read would wait. Maps
    /// failures and transport errors as it does.
    /// </summary>
    internal bool TryReadInput(PipeReader input, out ReadResult result)
    {
        ThrowIfFailed();
        bool read;
        try
        {
            read = input.TryRead(out result);
        }
        catch (Exception ex) when (ex is not BackendException)
        {
            throw InputReadFailed(ex);
        }
        if (read)
        {
            ThrowIfFailedAfterRead(input, result);
        }
        return read;
    }

    /// <summary>Reads the transport's input for the response side: maps aborts, failures and transport errors.</summary>
    internal async ValueTask<ReadResult> ReadInputAsync(PipeReader input, CancellationToken cancellationToken = default)
    {
        ThrowIfFailed();
        ReadResult result;
        try
        {
            result = await input.ReadAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            throw;
        }
        catch (Exception ex) when (ex is not BackendException)
        {
            throw InputReadFailed(ex);
        }
        ThrowIfFailedAfterRead(input, result);
        return result;
    }

    private BackendException InputReadFailed(Exception ex) =>
        Fail(BackendFailure.ConnectionLost, "Reading the response from the backend failed.", ex);

    /// <summary>A failure recorded while the read waited (or before it): the bytes go back unconsumed, the failure is thrown.</summary>
    private void ThrowIfFailedAfterRead(PipeReader input, in ReadResult result)
    {
        if (Failure is not null)
        {
            input.AdvanceTo(result.Buffer.Start);
            ThrowIfFailed();
        }
    }

    /// <summary>The response body reached its end (and its trailers were read).</summary>
    internal void OnResponseComplete() => _responseComplete = true;

    /// <summary>Records the first failure and wakes both sides so they see it; returns the failure to throw.</summary>
    internal BackendException Fail(BackendFailure failure, string message, Exception? inner = null)
    {
        var exception = new BackendException(failure, message, inner: inner);
        if (Interlocked.CompareExchange(ref _failure, exception, null) is { } first)
        {
            return first;
        }
        // Either side may be parked in the transport (a read waiting for bytes, a flush waiting for room).
        _transport.Input.CancelPendingRead();
        _transport.Output.CancelPendingFlush();
        return exception;
    }

    /// <summary>The request could not be written: the writer gets <see cref="BackendFailure.ConnectionLost"/>, the exchange goes on.</summary>
    private BackendException FailRequest(string message, Exception? inner = null)
    {
        var exception = new BackendException(BackendFailure.ConnectionLost, message, inner: inner);
        return Interlocked.CompareExchange(ref _requestFailure, exception, null) ?? exception;
    }

    /// <summary>Throws the exchange's failure, or the request side's own.</summary>
    internal void ThrowIfRequestFailed()
    {
        ThrowIfFailed();
        if (Volatile.Read(ref _requestFailure) is { } failure)
        {
            throw failure;
        }
    }

    internal void ThrowIfFailed()
    {
        if (Failure is { } failure)
        {
            throw failure;
        }
    }

    /// <summary>
    /// HTTP/1.1 cannot abandon one message and keep the connection (RFC 9112 §9.6), so the connection closes when the
    /// exchange is disposed; pending reads and writes fail at once. <paramref name="errorCode"/> has no HTTP/1.1 meaning.
    /// </summary>
    public override void Abort(uint errorCode = 0x8) => Fail(BackendFailure.Aborted, "The backend exchange was aborted.");

    // NOTE: not an async method: a request whose body's last flush finished in place (nearly all) releases the connection
    // without a state machine.
    public override ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return default;
        }
        if (_pendingFlush is { } flush)
        {
            return ReleaseAfterFlushAsync(flush);
        }
        Release();
        return default;
    }

    private async ValueTask ReleaseAfterFlushAsync(Task flush)
    {
        try
        {
            await flush.ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            FailRequest("Writing the request to the backend failed.", ex);
        }
        Release();
    }

    private void Release()
    {
        // RFC 9112 §9.3: persistent only when both messages ended at their boundaries and the backend allows it.
        var reusable = Failure is null && _requestFailure is null && _requestComplete && _responseComplete && _keepAlive;
        _connection.Release(this, reusable);
    }

    /// <summary>
    /// Collects response fields (header section or trailer section): names lowercased, values as ISO-8859-1, and the
    /// connection-specific fields dropped (RFC 9110 §7.6.1: a proxy "MUST remove" Connection, the fields it names, and
    /// the other hop-by-hop fields before forwarding).
    /// </summary>
    /// <param name="target">Where the fields go (a head's sink is pointed at each response's list by <see cref="Start"/>).</param>
    // Owned by the response side of one exchange.
    internal sealed class ResponseFieldSink(HttpHeaderList target) : IHttp1ResponseSink
    {
        /// <summary>How many leading fields of a response head the thread remembers (<see cref="OnField"/>).</summary>
        internal const int RecentFieldCount = 16;

        // The fields of the response heads this thread parsed last, by position: slot i holds the i-th relayed field of
        // the last head that had one there. Read and written only through a sink the thread started (see Start).
        [ThreadStatic] private static KeyValuePair<string, string>[]? t_recent;

        private HttpHeaderList _target = target;
        private KeyValuePair<string, string>[] _recent = [];
        private List<string>? _connectionOptions;

        /// <summary>Starts a new head into <paramref name="target"/> (the sink is kept with its exchange).</summary>
        public void Start(HttpHeaderList target)
        {
            _target = target;
            _recent = t_recent ??= new KeyValuePair<string, string>[RecentFieldCount];
            _connectionOptions = null;
        }

        public void OnStatusLine(Http1Version version, int statusCode, ReadOnlySpan<byte> reason)
        {
            // The status code travels in Http1ResponseHead; the reason phrase is not relayed (RFC 9112 §4: a client
            // SHOULD ignore it, and HTTP/2 has none).
        }

        /// <remarks>
        /// NOTE: a backend answers with the same fields in the same order (Content-Length, Content-Type, Date...), so the
        /// field the thread saw last at this position is checked first: when its name is this one (whatever the case),
        /// that name string is this one's, already known to be no connection-specific field, and no lowercasing or lookup
        /// is needed; an equal value is that string too. The fields are the thread's, not the connection's: behind 256
        /// backend connections the previous response of the same connection was 256 responses ago, and reading its list
        /// and strings missed the cache (the list's length, then each value's length, were the method's hottest
        /// instructions, 3% of a proxied GET's user samples); the thread's last head was parsed a moment ago.
        /// A head whose parse spans reads may go on on another thread while this sink still holds the first thread's
        /// slots: a slot is then read or written by two threads. Each string a slot yields is compared in full before it
        /// is used, so a slot torn between two writes costs a lookup, never a wrong field.
        /// </remarks>
        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
        {
            var position = _target.Count;
            var recent = _recent;
            if ((uint)position < (uint)recent.Length)
            {
                var field = recent[position];
                if (field.Key is { } key && key.Length == name.Length && Ascii.EqualsIgnoreCase(name, key))
                {
                    if (field.Value is { } known && KnownHeaderStrings.EqualsLatin1(known, value))
                    {
                        _target.Add(key, known);
                        return;
                    }
                    var changed = KnownHeaderStrings.GetValue(value);
                    recent[position] = new(key, changed);
                    _target.Add(key, changed);
                    return;
                }
            }
            Span<byte> lower = name.Length <= 256 ? stackalloc byte[name.Length] : new byte[name.Length];
            Ascii.ToLower(name, lower, out _);
            var nameString = KnownHeaderStrings.GetName(lower);
            if (HttpFieldRules.IsConnectionSpecificInResponse(nameString))
            {
                if (nameString == "connection")
                {
                    (_connectionOptions ??= new()).Add(KnownHeaderStrings.GetValue(value));
                }
                return;
            }
            var valueString = KnownHeaderStrings.GetValue(value);
            if ((uint)position < (uint)recent.Length)
            {
                recent[position] = new(nameString, valueString);
            }
            _target.Add(nameString, valueString);
        }

        public void Reset() => _connectionOptions = null;

        /// <summary>Removes the fields the Connection field named (it may come after them, so this runs once the head is complete).</summary>
        public void RemoveConnectionOptions()
        {
            if (_connectionOptions is null)
            {
                return;
            }
            foreach (var options in _connectionOptions)
            {
                foreach (var range in options.AsSpan().Split(','))
                {
                    var option = options.AsSpan(range).Trim(" \t");
                    if (!option.IsEmpty)
                    {
                        var optionName = option.ToString();
                        _target.RemoveAll(field => field.Key.Equals(optionName, StringComparison.OrdinalIgnoreCase));
                    }
                }
            }
        }
    }
}
