using System.Diagnostics;
using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http1;

/// <summary>
/// The request body as a <see cref="PipeReader"/>. The first read sends "100 Continue" when the
/// client asked for it, then starts a pump that decodes the body (Content-Length or chunked)
/// from the transport into a small bounded pipe the app reads from. The pump only reads the
/// transport when the app has room, so a slow app pushes back on the client (TCP flow control).
///
/// NOTE: decoded bytes are copied once into the inner pipe. Handing out transport slices directly
/// would save the copy but gives a reader that examines without consuming (e.g. a JSON parser
/// waiting for a whole token) no way to see past a chunk boundary. TODO(http1-perf): zero-copy
/// path for Content-Length bodies.
///
/// After the body ends the pump keeps a read pending on the transport, so a client that closes
/// the connection mid-response fires <see cref="HttpExchange.RequestAborted"/> (SSE). It stops at
/// the first byte of a pipelined request, which it leaves unread.
/// </summary>
// Owned by the app (reader side) and the pump task (transport side); they meet only in the inner pipe.
internal sealed class Http1RequestBody : PipeReader
{
    private static readonly PipeOptions s_innerOptions = new(
        pauseWriterThreshold: 64 * 1024, resumeWriterThreshold: 32 * 1024, useSynchronizationContext: false);

    private readonly Http1Connection _connection;
    private readonly Http1Exchange _exchange;
    private readonly Http1BodyFraming _framing;
    private readonly Pipe _inner = new(s_innerOptions);
    private readonly IHttp1FieldSink _trailerSink;
    private Http1ChunkedDecoder _chunked;
    private long _remaining;
    private Task? _pump;
    private volatile bool _discard;
    private long _discardBudget; // the pump's: set at construction, spent only by the pump
    private bool _appCompleted;

    public Http1RequestBody(Http1Connection connection, Http1Exchange exchange, in Http1RequestHead head, IHttp1FieldSink trailerSink)
    {
        _connection = connection;
        _exchange = exchange;
        _framing = head.Framing;
        _remaining = head.Framing == Http1BodyFraming.ContentLength ? head.ContentLength : 0;
        _chunked = new Http1ChunkedDecoder(connection.Limits);
        // Set once here: afterwards only the pump touches the budget (it may already be discarding
        // when the app completes the body early).
        _discardBudget = connection.MaxRequestBodyDrainSize;
        _trailerSink = trailerSink;
        Debug.Assert(_framing != Http1BodyFraming.None, "A request without a body reads Http1EmptyRequestBody.");
    }

    /// <summary>True once the whole body has been read off the transport.</summary>
    public bool IsBodyComplete => _framing == Http1BodyFraming.None || (_framing == Http1BodyFraming.ContentLength ? _remaining == 0 : _chunked.IsComplete);

    /// <summary>The framing error that ended the body, if any; the connection answers it with its status.</summary>
    public Http1ParseException? FramingError { get; private set; }

    public bool PumpStarted => _pump is not null;

    public override async ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        await EnsureStartedAsync(cancellationToken).ConfigureAwait(false);
        return await _inner.Reader.ReadAsync(cancellationToken).ConfigureAwait(false);
    }

    public override bool TryRead(out ReadResult result)
    {
        if (_pump is null && _framing != Http1BodyFraming.None)
        {
            // Starting needs an await (100 Continue); the next ReadAsync will do it.
            result = default;
            return false;
        }
        return _inner.Reader.TryRead(out result);
    }

    public override void AdvanceTo(SequencePosition consumed) => _inner.Reader.AdvanceTo(consumed);

    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined) => _inner.Reader.AdvanceTo(consumed, examined);

    public override void CancelPendingRead() => _inner.Reader.CancelPendingRead();

    public override void Complete(Exception? exception = null)
    {
        _appCompleted = true;
        _discard = true;
        _inner.Reader.Complete(exception);
    }

    private ValueTask EnsureStartedAsync(CancellationToken cancellationToken)
    {
        if (_pump is not null || _framing == Http1BodyFraming.None)
        {
            return ValueTask.CompletedTask;
        }
        return StartAsync(cancellationToken);
    }

    private async ValueTask StartAsync(CancellationToken cancellationToken)
    {
        // RFC 9110 §10.1.1: the server sends 100 (Continue) before reading the body the client is holding back.
        await _exchange.SendContinueIfExpectedAsync(cancellationToken).ConfigureAwait(false);
        _pump ??= PumpAsync();
    }

    /// <summary>
    /// Called by the connection once the app is done: stops handing bytes to the app and reads
    /// the rest of the body off the wire, at most the connection's MaxRequestBodyDrainSize. True when the
    /// connection is positioned at the next request.
    /// </summary>
    public async Task<bool> DrainAsync()
    {
        if (!_appCompleted)
        {
            Complete();
        }
        if (_framing == Http1BodyFraming.ContentLength && _remaining > _connection.MaxRequestBodyDrainSize)
        {
            // Known to be too large to skip: close instead of reading it.
            return false;
        }
        if (_pump is null)
        {
            if (IsBodyComplete)
            {
                return true;
            }
            _pump = PumpAsync();
        }
        else if (IsBodyComplete)
        {
            // The pump is watching for disconnects: take the transport back.
            _connection.StopPendingInputRead();
        }
        try
        {
            await _pump.ConfigureAwait(false);
        }
        catch (Exception)
        {
            return false;
        }
        return IsBodyComplete && !_connection.IsAborted && FramingError is null;
    }

    private async Task PumpAsync()
    {
        // Step 1: move the body from the transport to the app (or discard it once the app is done).
        var writer = _inner.Writer;
        try
        {
            while (!IsBodyComplete)
            {
                var result = await _connection.ReadInputAsync().ConfigureAwait(false);
                if (result.IsCanceled)
                {
                    // Abort or drain timeout: the connection will close.
                    _connection.Input.AdvanceTo(result.Buffer.Start);
                    writer.Complete(new IOException("The request was aborted."));
                    return;
                }
                var buffer = result.Buffer;
                SequencePosition consumed;
                try
                {
                    consumed = Decode(buffer, _discard ? null : writer);
                }
                catch (Http1ParseException ex)
                {
                    _connection.Input.AdvanceTo(buffer.Start, buffer.End);
                    FramingError = ex;
                    writer.Complete(ex);
                    return;
                }
                // Mark everything examined only when we need more bytes: once the body is done, what
                // follows is the next request and its parser must see it without waiting.
                if (IsBodyComplete)
                {
                    _connection.Input.AdvanceTo(consumed);
                }
                else
                {
                    _connection.Input.AdvanceTo(consumed, buffer.End);
                }
                if (!IsBodyComplete && result.IsCompleted)
                {
                    // The client went away mid-body.
                    _exchange.OnClientDisconnected();
                    writer.Complete(new IOException("Unexpected end of request content."));
                    return;
                }
                if (_discard && _discardBudget < 0)
                {
                    writer.Complete();
                    return;
                }
                if (!_discard)
                {
                    var flush = await writer.FlushAsync().ConfigureAwait(false);
                    if (flush.IsCompleted)
                    {
                        _discard = true;
                    }
                }
            }
            writer.Complete();
        }
        catch (Exception ex)
        {
            // The transport failed (a reset connection): the client is gone. RequestAborted before the body's fault.
            _exchange.OnClientDisconnected();
            writer.Complete(ex);
            throw;
        }

        // Step 2: the body is done; watch for the client closing while the app still responds.
        await MonitorAsync().ConfigureAwait(false);
    }

    private async Task MonitorAsync()
    {
        while (true)
        {
            var result = await _connection.ReadInputAsync().ConfigureAwait(false);
            // Never mark bytes examined here: the next request's parser must see them at once.
            _connection.Input.AdvanceTo(result.Buffer.Start);
            if (result.IsCanceled)
            {
                return;
            }
            if (result.IsCompleted && result.Buffer.IsEmpty)
            {
                _exchange.OnClientDisconnected();
                return;
            }
            if (!result.Buffer.IsEmpty)
            {
                // A pipelined request: we cannot watch past it without consuming it.
                return;
            }
        }
    }

    private SequencePosition Decode(ReadOnlySequence<byte> buffer, PipeWriter? destination)
    {
        if (_framing == Http1BodyFraming.ContentLength)
        {
            var take = Math.Min(_remaining, buffer.Length);
            Deliver(buffer.Slice(0, take), destination);
            _remaining -= take;
            return buffer.GetPosition(take);
        }

        var reader = new SequenceReader<byte>(buffer);
        while (_chunked.TryRead(ref reader, _trailerSink, out var data))
        {
            if (_chunked.IsComplete)
            {
                break;
            }
            Deliver(data, destination);
        }
        return reader.Position;
    }

    private void Deliver(ReadOnlySequence<byte> data, PipeWriter? destination)
    {
        if (destination is null)
        {
            _discardBudget -= data.Length;
            return;
        }
        foreach (var segment in data)
        {
            destination.Write(segment.Span);
        }
    }
}
