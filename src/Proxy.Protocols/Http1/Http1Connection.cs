using System.Globalization;
using System.Text;
using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http1;

/// <summary>
/// Serves HTTP/1.0 and HTTP/1.1 requests one after another on one connection (RFC 9112 §9.3).
/// Per request: parse the head (under the keep-alive and request-headers timeouts), run the
/// handler on the thread pool, finish the response, then drain the unread request body (or
/// close) so the next request starts at a message boundary.
///
/// Transport ownership: the input is read by this loop while it waits for a head, and by the
/// request's body pump (Http1RequestBody) while the handler runs; the output is written by the
/// app through the exchange while the handler runs, and by this loop otherwise. The two never
/// overlap because the loop awaits the handler and the drain before it reads again.
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
    private TimeoutKind _armed;
    private volatile int _timedOut;
    private volatile bool _aborted;
    private volatile bool _clientGone;
    private volatile bool _inputReadStop;
    private volatile Http1Exchange? _current;

    public Http1Connection(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata meta, TimeProvider time)
    {
        _transport = transport;
        _options = options;
        _handler = handler;
        _meta = meta;
        _time = time;
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
        _transport.Input.CancelPendingRead();
        _transport.Output.CancelPendingFlush();
        _current?.CancelAborted();
    }

    public async Task ProcessAsync(CancellationToken cancellationToken)
    {
        using var registration = cancellationToken.Register(static state => ((Http1Connection)state!).Abort(), this);
        _timer = _time.CreateTimer(static state => ((Http1Connection)state!).OnTimer(), this, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        try
        {
            var isFirst = true;
            while (!_aborted)
            {
                var exchange = new Http1Exchange(this) { Connection = _meta };
                _current = exchange;

                // Step 1: the request head. The first request gets the headers timeout from the
                // start; later ones idle under the keep-alive timeout until their first byte.
                Arm(isFirst ? TimeoutKind.RequestHeaders : TimeoutKind.KeepAlive);
                Http1RequestHead head;
                try
                {
                    var parsed = await ReadHeadAsync(exchange).ConfigureAwait(false);
                    if (parsed is null)
                    {
                        break;
                    }
                    head = parsed.Value;
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
                exchange.DisposeAbortSource();
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
            _current = null;
            lock (_timerLock)
            {
                _armed = TimeoutKind.None;
                _timer.Dispose();
            }
            await _transport.Input.CompleteAsync().ConfigureAwait(false);
            await _transport.Output.CompleteAsync().ConfigureAwait(false);
        }
    }

    private async Task<Http1RequestHead?> ReadHeadAsync(Http1Exchange exchange)
    {
        while (true)
        {
            var result = await ReadInputAsync().ConfigureAwait(false);
            var buffer = result.Buffer;
            if (result.IsCanceled)
            {
                Input.AdvanceTo(buffer.Start);
                if (_timedOut == (int)TimeoutKind.RequestHeaders && !buffer.IsEmpty)
                {
                    // RFC 9110 §15.5.9: 408 when the client did not finish its request in time.
                    await WriteErrorResponseAsync(408, "Request headers timeout").ConfigureAwait(false);
                }
                return null;
            }
            if (!buffer.IsEmpty)
            {
                SwitchKeepAliveToHeadersTimeout();
            }
            bool complete;
            Http1RequestHead head;
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
                return head;
            }
            Input.AdvanceTo(buffer.Start, buffer.End);
            if (result.IsCompleted)
            {
                // The client closed, between requests or in the middle of a head: nothing to answer.
                return null;
            }
        }
    }

    /// <summary>Runs the handler and finishes the exchange. False when the connection must close.</summary>
    private async Task<bool> RunExchangeAsync(Http1Exchange exchange)
    {
        if (!exchange.RequestHasBody)
        {
            exchange.Body.StartMonitor();
        }

        Exception? failure = null;
        try
        {
            // HTTP/1.1 has one exchange at a time, so the app runs on the connection loop itself
            // (the disconnect monitor above is already waiting on the input).
            await _handler.HandleAsync(exchange).ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            failure = ex;
        }

        // Step 4: finish the response.
        var bodyError = exchange.Body.FramingError;
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

        // Step 5: skip what the app left of the request body, within limits.
        Arm(TimeoutKind.Drain);
        try
        {
            return await exchange.Body.DrainAsync().ConfigureAwait(false);
        }
        finally
        {
            Disarm();
            _inputReadStop = false;
        }
    }

    /// <summary>Reads the transport input, swallowing stray CancelPendingRead wake-ups.</summary>
    internal async ValueTask<ReadResult> ReadInputAsync()
    {
        while (true)
        {
            var result = await Input.ReadAsync().ConfigureAwait(false);
            if (!result.IsCanceled || _aborted || _timedOut != (int)TimeoutKind.None || _inputReadStop)
            {
                return result;
            }
            Input.AdvanceTo(result.Buffer.Start);
        }
    }

    /// <summary>Wakes the pending input read (the disconnect monitor) so the loop can take the input back.</summary>
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
            _armed = kind;
            _timer!.Change(due, Timeout.InfiniteTimeSpan);
        }
    }

    private void SwitchKeepAliveToHeadersTimeout()
    {
        lock (_timerLock)
        {
            if (_armed == TimeoutKind.KeepAlive)
            {
                _armed = TimeoutKind.RequestHeaders;
                _timer!.Change(_options.RequestHeadersTimeout, Timeout.InfiniteTimeSpan);
            }
        }
    }

    private void Disarm()
    {
        lock (_timerLock)
        {
            _armed = TimeoutKind.None;
            _timer?.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        }
    }

    private void OnTimer()
    {
        lock (_timerLock)
        {
            if (_armed == TimeoutKind.None)
            {
                return;
            }
            _timedOut = (int)_armed;
            _armed = TimeoutKind.None;
        }
        _transport.Input.CancelPendingRead();
    }
}
