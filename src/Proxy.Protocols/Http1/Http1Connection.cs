using System.Globalization;
using System.Text;
using System.Threading.Tasks.Sources;
using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http1;

/// <summary>
/// Serves HTTP/1.0 and HTTP/1.1 requests one after another on one connection (RFC 9112 §9.3).
/// Per request: parse the head (under the keep-alive and request-headers timeouts), run the
/// handler on this loop, finish the response, then drain the unread request body (or close) so
/// the next request starts at a message boundary. One exchange serves every request of the
/// connection, reset in between (Http1Exchange.Reset).
///
/// Transport ownership: the input is read by this loop while it waits for a head, and by the
/// request's body pump (Http1RequestBody) or the disconnect watch below while the handler runs; the output is written by the
/// app through the exchange while the handler runs, and by this loop otherwise. The two never
/// overlap because the loop awaits the handler and the drain before it reads again.
///
/// Disconnect watch for a request without a body: before the handler runs, the loop starts the
/// read it would make for the next head anyway and only registers a callback on it (<see cref="InputWatch"/>). A
/// Content-Length body starts the same watch once the app has read it to its end (<see cref="WatchAfterBody"/>).
/// If the client closes while the handler runs, the callback fires RequestAborted; otherwise the
/// read completes when the next request arrives, and the loop takes its result as the first read
/// of that head. Nothing is cancelled when the app finishes, so no wake-up is on the critical path.
///
/// TODO(http1-upgrade): CONNECT gets 501; Upgrade (h2c, websocket) is ignored as RFC 9110 §7.8
/// allows, so the request is served as plain HTTP/1.1.
/// </summary>
// Owned by the ProcessAsync loop; Abort and the timer callback may run on any thread.
public sealed class Http1Connection
{
    private enum TimeoutKind
    {
        None,
        KeepAlive,
        RequestHeaders,
        Drain,
    }

    private readonly IDuplexPipe _transport;
    private readonly Http1Options _options;
    private readonly IHttpRequestHandler _handler;
    private readonly ConnectionMetadata _meta;
    private readonly TimeProvider _time;
    private readonly object _timerLock = new();
    private ITimer? _timer;
    // Under _timerLock: what is armed, when it expires (time since _timeOrigin; MaxValue: never), and whether the timer
    // will fire (see Arm). The timer's longest wait: the shortest timeout any Arm may set.
    private TimeoutKind _armed;
    private TimeSpan _deadline;
    private bool _timerScheduled;
    private readonly TimeSpan _timerPeriod;
    private readonly long _timeOrigin;
    private volatile int _timedOut;
    private volatile bool _aborted;
    private volatile bool _clientGone;
    private volatile bool _inputReadStop;
    private volatile Http1Exchange? _current;
    private InputWatch? _watch;

    public Http1Connection(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata meta, TimeProvider time)
    {
        _transport = transport;
        _options = options;
        _handler = handler;
        _meta = meta;
        _timerPeriod = ShortestTimeout(options.KeepAliveTimeout, options.RequestHeadersTimeout);
        _time = time;
        _timeOrigin = time.GetTimestamp();
        Limits = new Http1ParserLimits(options.MaxRequestLineSize, options.MaxRequestHeadersTotalSize, options.MaxRequestHeaderCount);
    }

    internal Http1ParserLimits Limits { get; }

    /// <summary>How much unread request body may be skipped to reach the next request.</summary>
    internal long MaxRequestBodyDrainSize => _options.MaxRequestBodyDrainSize;

    internal PipeReader Input => _transport.Input;

    internal PipeWriter Output => _transport.Output;

    internal bool IsAborted => _aborted;

    /// <summary>True while the loop idles under the keep-alive timeout (diagnostics and tests).</summary>
    internal bool IsWaitingForNextRequest
    {
        get
        {
            lock (_timerLock)
            {
                return _armed == TimeoutKind.KeepAlive;
            }
        }
    }

    /// <summary>Closes the connection: pending reads and flushes end, the current request's RequestAborted fires.</summary>
    public void Abort()
    {
        _aborted = true;
        // RequestAborted first: the cancelled read below fails the request body, and an app must see the token
        // cancelled when that read throws.
        _current?.CancelAborted();
        _transport.Input.CancelPendingRead();
        _transport.Output.CancelPendingFlush();
    }

    public async Task ProcessAsync(CancellationToken cancellationToken)
    {
        using var registration = cancellationToken.Register(static state => ((Http1Connection)state!).Abort(), this);
        _timer = _time.CreateTimer(static state => ((Http1Connection)state!).OnTimer(), this, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        try
        {
            var isFirst = true;
            var exchange = new Http1Exchange(this) { Connection = _meta };
            _current = exchange;
            while (!_aborted)
            {
                if (!isFirst)
                {
                    exchange.Reset();
                }

                // Step 1: the request head. The first request gets the headers timeout from the
                // start; later ones idle under the keep-alive timeout until their first byte.
                // NOTE: the reads are awaited here, in the connection's own state machine, rather than
                // in a helper: an async helper that suspends allocates its box on every request.
                Arm(isFirst ? TimeoutKind.RequestHeaders : TimeoutKind.KeepAlive);
                Http1RequestHead head;
                HeadStatus status;
                try
                {
                    while (true)
                    {
                        var result = _watch is { IsOutstanding: true } watch
                            ? await watch.TakeAsync().ConfigureAwait(false)
                            : await Input.ReadAsync().ConfigureAwait(false);
                        if (IsStrayCancel(result))
                        {
                            Input.AdvanceTo(result.Buffer.Start);
                            continue;
                        }
                        status = TryTakeHead(result, exchange, out head);
                        if (status != HeadStatus.NeedMore)
                        {
                            break;
                        }
                    }
                }
                catch (Http1ParseException ex) when (isFirst && ex.IsUnrecognizedProtocol)
                {
                    // NOTE: the first line has no HTTP/1.x version, so the peer is not speaking HTTP/1
                    // (on a cleartext port that also takes h2c, typically a broken HTTP/2 preface:
                    // RFC 9113 §3.4 asks for the connection to end). Answering in HTTP/1.1 would put
                    // bytes on the wire the peer cannot parse; close instead.
                    break;
                }
                catch (Http1ParseException ex)
                {
                    await WriteErrorResponseAsync(ex.StatusCode, ex.Reason).ConfigureAwait(false);
                    break;
                }
                finally
                {
                    Disarm();
                }
                if (status == HeadStatus.TimedOut)
                {
                    // RFC 9110 §15.5.9: 408 when the client did not finish its request in time.
                    await WriteErrorResponseAsync(408, "Request headers timeout").ConfigureAwait(false);
                    break;
                }
                if (status == HeadStatus.Closed)
                {
                    break;
                }
                exchange.OnHeadParsed(head);

                // Step 2: CONNECT needs a tunnel we do not have yet.
                if (head.TargetForm == Http1TargetForm.Authority)
                {
                    await WriteErrorResponseAsync(501, "CONNECT is not supported").ConfigureAwait(false);
                    break;
                }

                // Step 3: the app, then the rest of the request body.
                if (!await RunExchangeAsync(exchange).ConfigureAwait(false))
                {
                    break;
                }
                isFirst = false;
            }
        }
        catch (Exception ex) when (_aborted || _clientGone || ex is IOException or OperationCanceledException)
        {
            // The transport failed or we were aborted: nothing more can be said to this client.
            _current?.CancelAborted();
        }
        finally
        {
            var body = _current?.Body;
            _current = null;
            if (body is not null)
            {
                // The request body's pump (or its disconnect watch) may still be reading the input, or holding bytes it
                // read: it must let go of the input before the input is completed and its blocks go back to the pool.
                await body.StopPumpAsync().ConfigureAwait(false);
            }
            if (_watch is { IsOutstanding: true } watch)
            {
                // A read is still pending on the input: end it before completing the reader.
                StopPendingInputRead();
                try
                {
                    await watch.TakeAsync().ConfigureAwait(false);
                }
                catch (Exception)
                {
                    // The transport failed: the input is being completed anyway.
                }
            }
            lock (_timerLock)
            {
                _armed = TimeoutKind.None;
                _timer.Dispose();
            }
            await _transport.Input.CompleteAsync().ConfigureAwait(false);
            await _transport.Output.CompleteAsync().ConfigureAwait(false);
        }
    }

    private enum HeadStatus
    {
        NeedMore,
        Complete,
        /// <summary>The client closed (between requests or mid-head), or we were aborted: nothing to answer.</summary>
        Closed,
        /// <summary>The headers timeout fired with part of a head received: answer 408.</summary>
        TimedOut,
    }

    /// <summary>Parses the head from one read of the input and advances the input past what it used.</summary>
    private HeadStatus TryTakeHead(in ReadResult result, Http1Exchange exchange, out Http1RequestHead head)
    {
        var buffer = result.Buffer;
        if (result.IsCanceled)
        {
            Input.AdvanceTo(buffer.Start);
            head = default;
            return _timedOut == (int)TimeoutKind.RequestHeaders && !buffer.IsEmpty ? HeadStatus.TimedOut : HeadStatus.Closed;
        }
        if (!buffer.IsEmpty)
        {
            SwitchKeepAliveToHeadersTimeout();
        }
        bool complete;
        SequencePosition consumed;
        try
        {
            complete = Http1RequestParser.TryParseHead(buffer, exchange, Limits, out head, out consumed);
        }
        catch (Http1ParseException)
        {
            Input.AdvanceTo(buffer.Start, buffer.End);
            throw;
        }
        if (complete)
        {
            Input.AdvanceTo(consumed);
            return HeadStatus.Complete;
        }
        Input.AdvanceTo(buffer.Start, buffer.End);
        return result.IsCompleted ? HeadStatus.Closed : HeadStatus.NeedMore;
    }

    /// <summary>Runs the handler and finishes the exchange. False when the connection must close.</summary>
    private async Task<bool> RunExchangeAsync(Http1Exchange exchange)
    {
        var body = exchange.Body;
        if (body is null)
        {
            (_watch ??= new InputWatch(this)).Start(exchange);
        }

        Exception? failure = null;
        try
        {
            // HTTP/1.1 has one exchange at a time, so the app runs on the connection loop itself
            // (the disconnect watch or the body pump is the only reader of the input meanwhile).
            await _handler.HandleAsync(exchange).ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            failure = ex;
        }

        // Step 4: finish the response.
        var bodyError = body?.FramingError;
        try
        {
            if (bodyError is not null && !exchange.HasResponseStarted)
            {
                // RFC 9112 §6.3: after a framing error the connection cannot be reused.
                await WriteErrorResponseAsync(bodyError.StatusCode, bodyError.Reason).ConfigureAwait(false);
                return false;
            }
            if (failure is not null || bodyError is not null)
            {
                if (exchange.HasResponseStarted || _aborted)
                {
                    // Half a response is on the wire: closing is the only honest end.
                    return false;
                }
                await exchange.CompleteWithStatusAsync(500).ConfigureAwait(false);
            }
            else
            {
                try
                {
                    await exchange.CompleteAsync().ConfigureAwait(false);
                }
                catch (InvalidOperationException) when (!exchange.HasResponseStarted)
                {
                    // The app left an invalid response head (e.g. CR/LF in a value): answer 500 instead.
                    await exchange.CompleteWithStatusAsync(500).ConfigureAwait(false);
                }
            }
        }
        catch (Exception) when (!_aborted)
        {
            return false;
        }

        if (!exchange.KeepAlive || exchange.ResponseIncomplete || _aborted || _clientGone)
        {
            return false;
        }

        if (body is null)
        {
            // Nothing to skip: the watch's pending read becomes the next head's first read.
            return true;
        }

        // Step 5: skip what the app left of the request body, within limits.
        Arm(TimeoutKind.Drain);
        try
        {
            return await body.DrainAsync().ConfigureAwait(false);
        }
        finally
        {
            Disarm();
            _inputReadStop = false;
        }
    }

    /// <summary>
    /// Starts the disconnect watch for <paramref name="exchange"/> once its Content-Length body has been read to its end
    /// (called by the body on the app's last AdvanceTo, while the loop awaits the handler): as for a request without a
    /// body, the watch's pending read fires RequestAborted if the client closes, and becomes the next head's first read.
    /// </summary>
    internal void WatchAfterBody(Http1Exchange exchange) => (_watch ??= new InputWatch(this)).Start(exchange);

    /// <summary>The disconnect watch holds a read (pending or done) the loop has not taken yet (tests).</summary>
    internal bool IsWatchOutstanding => _watch is { IsOutstanding: true };

    /// <summary>Reads the transport input (for the body pump), swallowing stray CancelPendingRead wake-ups.</summary>
    internal async ValueTask<ReadResult> ReadInputAsync()
    {
        while (true)
        {
            var result = await Input.ReadAsync().ConfigureAwait(false);
            if (!IsStrayCancel(result))
            {
                return result;
            }
            Input.AdvanceTo(result.Buffer.Start);
        }
    }

    /// <summary>A cancelled read nobody asked for now (a wake-up meant for a reader that had already finished).</summary>
    private bool IsStrayCancel(in ReadResult result)
        => result.IsCanceled && !_aborted && _timedOut == (int)TimeoutKind.None && !_inputReadStop;

    /// <summary>Wakes the pending input read (the body pump's disconnect watch, or the connection's InputWatch) so the loop can take the input back.</summary>
    internal void StopPendingInputRead()
    {
        _inputReadStop = true;
        Input.CancelPendingRead();
    }

    internal void MarkClientGone() => _clientGone = true;

    private async Task WriteErrorResponseAsync(int status, string reason)
    {
        if (_current is { HasResponseStarted: true } || _aborted)
        {
            return;
        }
        var text = string.Create(CultureInfo.InvariantCulture,
            $"HTTP/1.1 {status} {Http1ReasonPhrases.Get(status)}\r\nContent-Type: text/plain\r\nContent-Length: {reason.Length}\r\nConnection: close\r\n\r\n{reason}");
        var span = Output.GetSpan(text.Length);
        var written = Encoding.ASCII.GetBytes(text, span);
        Output.Advance(written);
        await Output.FlushAsync().ConfigureAwait(false);
    }

    // NOTE: the timeouts move a deadline, not the timer. Arming, switching and disarming were three ITimer.Change calls per
    // request (each a trip through the runtime's timer queue and its lock: 1.3% of a proxied HTTP/1.1 GET's samples,
    // session 29). Now they write _armed and _deadline under _timerLock, and the timer, once scheduled, fires no later than
    // the shortest timeout after it was set (_timerPeriod), so any deadline set since is still ahead of it: it re-arms
    // itself for what is left, or expires the armed timeout, or, with nothing armed, stops until the next Arm.
    private static TimeSpan ShortestTimeout(TimeSpan a, TimeSpan b) =>
        a == Timeout.InfiniteTimeSpan ? b : b == Timeout.InfiniteTimeSpan ? a : a < b ? a : b;

    private void Arm(TimeoutKind kind)
    {
        var due = kind switch
        {
            TimeoutKind.KeepAlive => _options.KeepAliveTimeout,
            _ => _options.RequestHeadersTimeout,
        };
        lock (_timerLock)
        {
            _timedOut = (int)TimeoutKind.None;
            SetDeadline(kind, due);
        }
    }

    private void SwitchKeepAliveToHeadersTimeout()
    {
        lock (_timerLock)
        {
            if (_armed == TimeoutKind.KeepAlive)
            {
                SetDeadline(TimeoutKind.RequestHeaders, _options.RequestHeadersTimeout);
            }
        }
    }

    private void Disarm()
    {
        lock (_timerLock)
        {
            _armed = TimeoutKind.None; // the timer, when it comes, finds nothing armed and stops
        }
    }

    /// <summary>Under <see cref="_timerLock"/>: <paramref name="kind"/> expires <paramref name="due"/> from now (infinite: never).</summary>
    private void SetDeadline(TimeoutKind kind, TimeSpan due)
    {
        _armed = kind;
        if (due == Timeout.InfiniteTimeSpan)
        {
            _deadline = TimeSpan.MaxValue;
            return;
        }
        due = due < TimeSpan.Zero ? TimeSpan.Zero : due;
        _deadline = Now + due;
        if (!_timerScheduled)
        {
            _timerScheduled = true;
            _timer!.Change(due < _timerPeriod ? due : _timerPeriod, Timeout.InfiniteTimeSpan);
        }
    }

    /// <summary>Monotonic time since the connection started (timestamps, not the wall clock), as the HTTP/2 connection keeps it.</summary>
    private TimeSpan Now => _time.GetElapsedTime(_timeOrigin);

    private void OnTimer()
    {
        lock (_timerLock)
        {
            if (_armed == TimeoutKind.None || _deadline == TimeSpan.MaxValue)
            {
                _timerScheduled = false;
                return;
            }
            var left = _deadline - Now;
            if (left > TimeSpan.Zero)
            {
                // Not yet: again when it is due, or after the shortest timeout if sooner (a deadline set meanwhile is no earlier).
                _timer!.Change(left < _timerPeriod ? left : _timerPeriod, Timeout.InfiniteTimeSpan);
                return;
            }
            _timerScheduled = false;
            _timedOut = (int)_armed;
            _armed = TimeoutKind.None;
        }
        _transport.Input.CancelPendingRead();
    }

    /// <summary>
    /// The disconnect watch of a request without a body, or of one whose Content-Length body was read: one pending read
    /// of the input with a callback instead of an awaiting task. Its result is kept for the loop (<see cref="TakeAsync"/>),
    /// which parses the next head from it. One per connection, reused.
    /// </summary>
    // Start is called by the connection loop (no body) or by the app's last read of a Content-Length body (while the loop
    // awaits the handler, which orders it before the loop's TakeAsync); the callback runs on the pipe's reader scheduler
    // while the loop runs the handler or awaits TakeAsync, never both at once for one read.
    private sealed class InputWatch : IValueTaskSource<ReadResult>
    {
        private readonly Http1Connection _connection;
        private readonly Action _onReadCompleted;
        private ManualResetValueTaskSourceCore<ReadResult> _core; // continuations run inline: the loop resumes on the callback's thread
        private ValueTask<ReadResult> _read;
        private Http1Exchange? _exchange;

        public InputWatch(Http1Connection connection)
        {
            _connection = connection;
            _onReadCompleted = OnReadCompleted;
        }

        /// <summary>True from <see cref="Start"/> until the loop takes the result.</summary>
        public bool IsOutstanding { get; private set; }

        /// <summary>Starts the read; <paramref name="exchange"/>'s RequestAborted fires if it finds the input closed.</summary>
        public void Start(Http1Exchange exchange)
        {
            _exchange = exchange;
            IsOutstanding = true;
            Read();
        }

        /// <summary>The watch's read result, once the input had something to say (data, end, or a cancel).</summary>
        public ValueTask<ReadResult> TakeAsync()
        {
            IsOutstanding = false;
            return new ValueTask<ReadResult>(this, _core.Version);
        }

        private void Read()
        {
            while (true)
            {
                ValueTask<ReadResult> read;
                try
                {
                    read = _connection.Input.ReadAsync();
                }
                catch (Exception ex)
                {
                    Finish(ex);
                    return;
                }
                if (!read.IsCompleted)
                {
                    _read = read;
                    read.ConfigureAwait(false).GetAwaiter().UnsafeOnCompleted(_onReadCompleted);
                    return;
                }
                if (!Complete(read))
                {
                    return;
                }
            }
        }

        private void OnReadCompleted()
        {
            var read = _read;
            _read = default;
            if (Complete(read))
            {
                Read();
            }
        }

        /// <summary>Takes the read's result; true when it was a stray cancel and the watch must read again.</summary>
        private bool Complete(ValueTask<ReadResult> read)
        {
            ReadResult result;
            try
            {
                result = read.GetAwaiter().GetResult();
            }
            catch (Exception ex)
            {
                Finish(ex);
                return false;
            }
            if (_connection.IsStrayCancel(result))
            {
                _connection.Input.AdvanceTo(result.Buffer.Start);
                return true;
            }
            if (!result.IsCanceled && result.IsCompleted && result.Buffer.IsEmpty)
            {
                // The client closed: an SSE handler, say, must learn it now.
                _exchange?.OnClientDisconnected();
            }
            // Data (the next, pipelined request) or the end: either way the loop parses it after the handler.
            _exchange = null;
            _core.SetResult(result);
            return false;
        }

        private void Finish(Exception ex)
        {
            _exchange = null;
            _core.SetException(ex);
        }

        public ReadResult GetResult(short token)
        {
            try
            {
                return _core.GetResult(token);
            }
            finally
            {
                _core.Reset();
            }
        }

        public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

        public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
            => _core.OnCompleted(continuation, state, token, flags);
    }
}
