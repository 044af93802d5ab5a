using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http1.Client;

/// <summary>
/// One HTTP/1.1 connection to a backend (RFC 9112), carrying one exchange at a time and kept alive between them
/// (RFC 9112 §9.3). No pipelining: the next exchange starts only after the previous one was disposed cleanly.
/// </summary>
/// <remarks>
/// Use: <see cref="SendAsync"/> validates the request, writes and flushes its head (or leaves it for the body's first
/// flush, <see cref="BackendRequest.HeadWaitsForBody"/>) and returns the exchange; the relay
/// writes the request body into <see cref="BackendExchange.RequestBody"/>, awaits
/// <see cref="BackendExchange.ReadResponseHeadAsync"/>, reads <see cref="BackendExchange.ResponseBody"/> and disposes
/// the exchange. Disposal hands the connection back: it is idle and <see cref="IsReusable"/> when the exchange ended
/// cleanly (whole request sent, whole response body read, keep-alive allowed, no error or abort), and closed
/// (transport completed) otherwise. A pool learns the outcome from <see cref="ExchangeReleased"/> or by checking
/// <see cref="IsReusable"/> after the dispose returned.
///
/// Transport ownership: the exchange's request side writes the transport's output, its response side reads the
/// transport's input; this class completes both when the connection closes, once no exchange is running.
/// </remarks>
// Owned by its pool between exchanges and by the running exchange during one; Abort may come from any thread.
public sealed class Http1ClientConnection : IAsyncDisposable
{
    private readonly IDuplexPipe _transport;
    private readonly object _lock = new();
    private Http1ClientExchange? _current;
    // NOTE: the exchange that ended cleanly last, kept for the next request with its body reader and writer, sinks and
    // lists (about 500 bytes of every forwarded request). Safe to reuse: the relay lets go of an exchange in DisposeAsync
    // and never touches it after (the contract of BackendExchange), and only a clean end (nothing failed or aborted, both
    // messages whole) keeps it.
    private Http1ClientExchange? _spare;
    private bool _closed;

    public Http1ClientConnection(IDuplexPipe transport, Http1ClientOptions? options = null)
    {
        _transport = transport;
        Options = options ?? new Http1ClientOptions();
    }

    public Http1ClientOptions Options { get; }

    /// <summary>True when no exchange runs and the connection is open: <see cref="SendAsync"/> may start the next one.</summary>
    public bool IsReusable
    {
        get
        {
            lock (_lock)
            {
                return _current is null && !_closed;
            }
        }
    }

    /// <summary>True once the connection was closed (a failed or non-persistent exchange, an abort, or dispose).</summary>
    public bool IsClosed
    {
        get
        {
            lock (_lock)
            {
                return _closed;
            }
        }
    }

    /// <summary>
    /// Raised after an exchange was disposed, with the connection already idle (reusable) or closed; the argument says
    /// which. Runs on the thread that disposed the exchange: keep it short (put the connection back in the pool).
    /// </summary>
    public event Action<Http1ClientConnection, bool>? ExchangeReleased;

    internal IDuplexPipe Transport => _transport;

    /// <summary>
    /// Starts an exchange: validates <paramref name="request"/> (an <see cref="ArgumentException"/> leaves the connection
    /// untouched and reusable), writes the request head and flushes it at once, so a request without a body (an SSE GET)
    /// reaches the backend without waiting. Throws <see cref="InvalidOperationException"/> when an exchange is running or
    /// the connection is closed, <see cref="BackendException"/> (<see cref="BackendFailure.ConnectionLost"/>) when the head
    /// cannot be written.
    /// </summary>
    /// <remarks>
    /// NOTE: the head of a request with a body is flushed on its own too rather than with the first body bytes, so a
    /// relay that reads the response head before it pumps the body (or a backend that answers before reading it) can
    /// never wait on a head we are still holding. The exception is <see cref="BackendRequest.HeadWaitsForBody"/>: the
    /// relay holds the whole body and flushes it at once, and the head leaves with it (a POST in one write, not two).
    /// </remarks>
    // NOTE: not an async method: a head whose flush completes at once (the socket took it) returns the exchange without a
    // state machine; only a flush that waits goes async. What fails before the flush faults the task, as it did.
    public ValueTask<BackendExchange> SendAsync(BackendRequest request, CancellationToken cancellationToken = default)
    {
        Http1ClientExchange exchange;
        try
        {
            exchange = Begin(request);
        }
        catch (Exception ex)
        {
            return ValueTask.FromException<BackendExchange>(ex);
        }
        if (request.HasBody && request.HeadWaitsForBody)
        {
            return new ValueTask<BackendExchange>(exchange); // the relay's body flush carries the head
        }

        var flush = exchange.FlushRequestAsync(cancellationToken);
        if (flush.IsCompletedSuccessfully)
        {
            flush.GetAwaiter().GetResult();
            return new ValueTask<BackendExchange>(exchange);
        }
        return FlushWaitingAsync(exchange, flush);

        static async ValueTask<BackendExchange> FlushWaitingAsync(Http1ClientExchange exchange, ValueTask<FlushResult> flush)
        {
            try
            {
                await flush.ConfigureAwait(false);
            }
            catch
            {
                // The caller never sees this exchange, so release it here: the connection closes.
                await exchange.DisposeAsync().ConfigureAwait(false);
                throw;
            }
            return exchange;
        }
    }

    // The authority of the last request whose head was measured (so found valid): the next request's, when it is the same
    // string object, is not checked again. Written by Begin only; a reference, so a racing reader sees one or the other.
    private string? _validAuthority;

    /// <summary>The exchange on this connection with the request's head written (not flushed).</summary>
    private Http1ClientExchange Begin(BackendRequest request)
    {
        ArgumentNullException.ThrowIfNull(request);
        var headLength = Http1RequestHeadWriter.Measure(request, out var framing, out var skipsFields, _validAuthority);
        _validAuthority = request.Authority; // valid: Measure throws on anything it does not send
        Http1ClientExchange exchange;
        lock (_lock)
        {
            if (_closed)
            {
                throw new InvalidOperationException("The connection is closed.");
            }
            if (_current is not null)
            {
                throw new InvalidOperationException("An exchange is already running on this connection.");
            }
            if (_spare is { } spare)
            {
                _spare = null;
                spare.Reuse(request, framing);
                exchange = spare;
            }
            else
            {
                exchange = new Http1ClientExchange(this, request, framing);
            }
            _current = exchange;
        }

        var output = _transport.Output;
        Http1RequestHeadWriter.Write(output.GetSpan(headLength)[..headLength], request, framing, skipsFields);
        output.Advance(headLength);
        return exchange;
    }

    /// <summary>
    /// Closes the connection (completes the transport). An exchange still running is aborted (its pending reads and
    /// writes fail with <see cref="BackendFailure.Aborted"/>) and the transport is completed when that exchange is
    /// disposed, once its flows are out of the transport.
    /// </summary>
    public ValueTask DisposeAsync()
    {
        Http1ClientExchange? current;
        lock (_lock)
        {
            current = _current;
        }
        if (current is not null)
        {
            // The exchange closes the transport when it is disposed; until then its flows may still be inside a read.
            current.Abort();
            return ValueTask.CompletedTask;
        }
        Close();
        return ValueTask.CompletedTask;
    }

    /// <summary>Called once by an exchange's DisposeAsync, after both its flows stopped.</summary>
    internal void Release(Http1ClientExchange exchange, bool reusable)
    {
        lock (_lock)
        {
            if (_current != exchange)
            {
                return;
            }
            _current = null;
            reusable &= !_closed;
            if (reusable)
            {
                _spare = exchange;
            }
        }
        if (!reusable)
        {
            Close();
        }
        ExchangeReleased?.Invoke(this, reusable);
    }

    private void Close()
    {
        lock (_lock)
        {
            if (_closed)
            {
                return;
            }
            _closed = true;
        }
        // RFC 9112 §9.6: a client that is done with a connection closes it; after a framing error nothing more may
        // be read from it (RFC 9112 §6.3: the rest of the byte stream cannot be trusted).
        _transport.Input.Complete();
        _transport.Output.Complete();
    }
}
