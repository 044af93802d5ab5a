using System.Text;
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
internal sealed class Http1ClientExchange : BackendExchange
{
    /// <summary>1xx responses skipped before the final one; more is a protocol error.</summary>
    internal const int MaxInterimResponses = 16;

    private readonly Http1ClientConnection _connection;
    private readonly IDuplexPipe _transport;
    private readonly bool _isHeadRequest;
    private readonly Http1ClientRequestBody _requestBody;
    private readonly Http1ClientResponseBody _responseBody;
    private BackendException? _failure;
    private BackendException? _requestFailure;
    private volatile bool _requestComplete;
    private volatile bool _responseComplete;
    private volatile bool _responseStarted;
    private bool _keepAlive;
    private Task? _pendingFlush;
    private int _disposed;

    public Http1ClientExchange(Http1ClientConnection connection, BackendRequest request, Http1RequestHeadWriter.BodyFraming framing)
    {
        _connection = connection;
        _transport = connection.Transport;
        _isHeadRequest = string.Equals(request.Method, "HEAD", StringComparison.Ordinal);
        _requestBody = new Http1ClientRequestBody(this, _transport.Output, framing, request.ContentLength ?? 0);
        _responseBody = new Http1ClientResponseBody(this, _transport.Input, connection.Options);
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

    // NOTE: one async method for the whole head (the read, the parse, the interim responses): it waits for the backend
    // once per request, and each nested async method that waits costs a state-machine box and a resumption hop.
    public override async ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken)
    {
        if (_responseStarted)
        {
            throw new InvalidOperationException("The response head was already read.");
        }
        _responseStarted = true;
        using var registration = cancellationToken.CanBeCanceled
            ? cancellationToken.UnsafeRegister(static state => ((Http1ClientExchange)state!).Abort(), this)
            : default;
        try
        {
            var input = _transport.Input;
            var sink = new ResponseFieldSink(ResponseHeaders, _connection.PreviousResponseFields);
            var limits = _connection.Options.Limits;
            var interim = 0;
            while (true)
            {
                // What ReadInputAsync does, inline.
                ThrowIfFailed();
                ReadResult result;
                try
                {
                    result = await input.ReadAsync().ConfigureAwait(false);
                }
                catch (Exception ex) when (ex is not BackendException)
                {
                    throw Fail(BackendFailure.ConnectionLost, "Reading the response from the backend failed.", ex);
                }
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
                    complete = Http1ResponseParser.TryParseHead(buffer, sink, limits, _isHeadRequest, out head, out consumed);
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
                    continue;
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
                    if (++interim > MaxInterimResponses)
                    {
                        throw Fail(BackendFailure.ProtocolError, $"The backend sent more than {MaxInterimResponses} interim (1xx) responses.");
                    }
                    ResponseHeaders.Clear();
                    sink.Reset();
                    continue;
                }

                sink.RemoveConnectionOptions();
                StatusCode = head.StatusCode;
                _keepAlive = head.KeepAlive;
                _responseBody.Start(head);
                return;
            }
        }
        catch (BackendException) when (cancellationToken.IsCancellationRequested)
        {
            throw new OperationCanceledException(cancellationToken);
        }
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
            throw Fail(BackendFailure.ConnectionLost, "Reading the response from the backend failed.", ex);
        }
        if (Failure is not null)
        {
            input.AdvanceTo(result.Buffer.Start);
            ThrowIfFailed();
        }
        return result;
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

    public override async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }
        if (_pendingFlush is { } flush)
        {
            try
            {
                await flush.ConfigureAwait(false);
            }
            catch (Exception ex)
            {
                FailRequest("Writing the request to the backend failed.", ex);
            }
        }
        // RFC 9112 §9.3: persistent only when both messages ended at their boundaries and the backend allows it.
        var reusable = Failure is null && _requestFailure is null && _requestComplete && _responseComplete && _keepAlive;
        _connection.Release(this, reusable);
    }

    /// <summary>
    /// Collects response fields (header section or trailer section): names lowercased, values as ISO-8859-1, and the
    /// connection-specific fields dropped (RFC 9110 §7.6.1: a proxy "MUST remove" Connection, the fields it names, and
    /// the other hop-by-hop fields before forwarding).
    /// </summary>
    /// <param name="target">Where the fields go.</param>
    /// <param name="previous">The previous response's fields on this connection: a backend answers with the same fields
    /// in the same order (Date, Content-Type, Server...), so an equal value reuses that string instead of a new one.</param>
    // Owned by the response side of one exchange.
    internal sealed class ResponseFieldSink(HttpHeaderList target, HttpHeaderList? previous = null) : IHttp1ResponseSink
    {
        private List<string>? _connectionOptions;

        public void OnStatusLine(Http1Version version, int statusCode, ReadOnlySpan<byte> reason)
        {
            // The status code travels in Http1ResponseHead; the reason phrase is not relayed (RFC 9112 §4: a client
            // SHOULD ignore it, and HTTP/2 has none).
        }

        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
        {
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
            target.Add(nameString, GetValue(nameString, value));
        }

        private string GetValue(string name, ReadOnlySpan<byte> value)
        {
            if (KnownHeaderStrings.FindValue(value) is { } known)
            {
                return known;
            }
            var position = target.Count;
            if (previous is not null && position < previous.Count)
            {
                var field = previous[position];
                if (ReferenceEquals(field.Key, name) && KnownHeaderStrings.EqualsLatin1(field.Value, value))
                {
                    return field.Value;
                }
            }
            return Encoding.Latin1.GetString(value);
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
                        target.RemoveAll(field => field.Key.Equals(optionName, StringComparison.OrdinalIgnoreCase));
                    }
                }
            }
        }
    }
}
