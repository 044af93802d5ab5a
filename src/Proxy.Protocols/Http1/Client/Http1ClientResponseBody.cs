using Proxy.Codecs.Http1;
using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http1.Client;

/// <summary>
/// The response body of an HTTP/1.1 client exchange: a <see cref="PipeReader"/> over the transport's own input,
/// sliced to the body, so bytes reach the relay as they arrive and without a copy. The framing comes from
/// <see cref="Http1ResponseParser"/> (RFC 9112 §6.3):
/// <list type="bullet">
/// <item>Content-Length: reads return at most the bytes left; fewer before the connection closes is
/// <see cref="BackendFailure.ConnectionLost"/> (RFC 9112 §8: an incomplete message);</item>
/// <item>chunked: <see cref="Http1ChunkedDecoder"/> consumes the framing, each read returns (part of) one chunk's data
/// as a slice of the input, the trailer section goes to <see cref="BackendExchange.ResponseTrailers"/>; malformed framing
/// is <see cref="BackendFailure.ProtocolError"/>, a close mid-body <see cref="BackendFailure.ConnectionLost"/>;</item>
/// <item>until close: everything up to the end of the input.</item>
/// </list>
/// Consuming (AdvanceTo) is what frees room in the transport, so a slow relay slows the backend (TCP flow control).
/// NOTE: chunked data is handed out as slices of the input, up to the end of the current chunk (the framing between
/// chunks is not data). A reader that examines everything without consuming it (a parser waiting for a whole
/// message) at a chunk boundary gets the following chunks joined behind what it holds, copied into a pooled buffer
/// (<c>_joined</c>) until it consumed them; a relay that consumes what it reads never pays that copy.
/// </summary>
// Owned by the relay's response-side flow (the same flow that read the head).
internal sealed class Http1ClientResponseBody : PipeReader
{
    private readonly Http1ClientExchange _exchange;
    private readonly PipeReader _input;
    private readonly Http1ClientOptions _options;
    private readonly Http1ClientExchange.ResponseFieldSink _trailerSink;
    private Http1ChunkedDecoder _chunked;
    private Http1BodyFraming _framing;
    private long _remaining;              // ContentLength: body bytes not consumed yet
    private long _pending;                // Chunked: data bytes the decoder passed that the reader has not consumed
    private ReadOnlySequence<byte> _last; // what the last read returned, when it came from the input
    private bool _inputHeld;              // the input awaits an AdvanceTo for _last
    private bool _lastIsFinal;            // UntilClose: _last reaches the end of the input
    private bool _wantsMore;              // Chunked: the reader examined all it was given without consuming all of it
    private byte[]? _joined;              // Chunked: data joined across chunk boundaries for a reader that wants more
    private int _joinedStart;
    private int _joinedEnd;
    private bool _lastFromJoined;
    private bool _started;
    private bool _done;
    private bool _readerCompleted;

    public Http1ClientResponseBody(Http1ClientExchange exchange, PipeReader input, Http1ClientOptions options)
    {
        _exchange = exchange;
        _input = input;
        _options = options;
        _trailerSink = new Http1ClientExchange.ResponseFieldSink(exchange.ResponseTrailers);
        _chunked = new Http1ChunkedDecoder(options.MaxResponseHeadSize, options.MaxResponseHeaderCount);
    }

    /// <summary>
    /// Readies the reader for the next request of its exchange (<see cref="Http1ClientExchange.Reuse"/>): the last body
    /// was read to its end, so nothing of the input is held.
    /// </summary>
    public void Reuse()
    {
        _chunked = new Http1ChunkedDecoder(_options.MaxResponseHeadSize, _options.MaxResponseHeaderCount);
        _trailerSink.Reset(); // its list is the exchange's trailers, cleared by the exchange
        _framing = default;
        _remaining = 0;
        _pending = 0;
        _last = default;
        _inputHeld = false;
        _lastIsFinal = false;
        _wantsMore = false;
        ReturnJoined();
        _started = false;
        _done = false;
        _readerCompleted = false;
    }

    /// <summary>Called once the final response head was parsed; the body starts at the input's next byte.</summary>
    public void Start(in Http1ResponseHead head)
    {
        _framing = head.Framing;
        _remaining = head.Framing == Http1BodyFraming.ContentLength ? head.ContentLength : 0;
        _started = true;
        if (_framing == Http1BodyFraming.None)
        {
            Finish();
        }
    }

    // NOTE: not an async method: a read whose bytes are in the transport's input already (a small body that came with
    // its head, the next part of a large one) returns without a state machine of its own or of the exchange's input read;
    // each was a frame of several hundred bytes zeroed per read. Only a read that has to wait goes async.
    public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        _exchange.ThrowIfFailed();
        if (!_started || _readerCompleted || _inputHeld)
        {
            throw new InvalidOperationException(!_started ? "Read the response head first." : _readerCompleted
                ? "The response body reader was completed." : "AdvanceTo was not called after the previous read.");
        }
        if (TryReadWithoutWaiting(out var ready))
        {
            return new ValueTask<ReadResult>(ready);
        }
        return ReadWaitingAsync(cancellationToken);
    }

    /// <summary>
    /// A result from what is already here: the joined data, the end of the body, or one look at the input's buffered
    /// bytes. False when the input has to be waited for (nothing buffered, or the chunked framing needs more bytes:
    /// the input was then advanced, so a wait returns only once more arrive).
    /// </summary>
    private bool TryReadWithoutWaiting(out ReadResult result)
    {
        if (TryReadHeld(out result))
        {
            return true;
        }
        // NOTE: one look only: after a chunked step that examined everything, the input would hand the same bytes again.
        return _exchange.TryReadInput(_input, out var input) && TryTakeInput(input, out result);
    }

    private async ValueTask<ReadResult> ReadWaitingAsync(CancellationToken cancellationToken)
    {
        while (true)
        {
            if (TryReadHeld(out var held))
            {
                return held;
            }
            var input = await _exchange.ReadInputAsync(_input, cancellationToken).ConfigureAwait(false);
            if (TryTakeInput(input, out var result))
            {
                return result;
            }
        }
    }

    /// <summary>The results that need no input: joined data the reader did not ask more for, and the end of the body.</summary>
    private bool TryReadHeld(out ReadResult result)
    {
        if (_joined is not null && (!_wantsMore || _done))
        {
            result = HoldJoined();
            return true;
        }
        if (_done)
        {
            result = new ReadResult(default, isCanceled: false, isCompleted: true);
            return true;
        }
        result = default;
        return false;
    }

    /// <summary>
    /// The body's part of one input read, by framing. False when the input was advanced and the next input read decides
    /// (chunked framing cut short).
    /// </summary>
    private bool TryTakeInput(ReadResult input, out ReadResult result)
    {
        var buffer = input.Buffer;
        if (input.IsCanceled)
        {
            _input.AdvanceTo(buffer.Start);
            result = new ReadResult(default, isCanceled: true, isCompleted: false);
            return true;
        }
        switch (_framing)
        {
            case Http1BodyFraming.ContentLength:
                if (buffer.Length >= _remaining)
                {
                    result = Hold(buffer.Slice(0, _remaining), isCompleted: true);
                    return true;
                }
                if (input.IsCompleted)
                {
                    _input.AdvanceTo(buffer.Start);
                    throw _exchange.Fail(BackendFailure.ConnectionLost,
                        $"The backend closed the connection {_remaining - buffer.Length} bytes before the end of the response body.");
                }
                result = Hold(buffer, isCompleted: false);
                return true;

            case Http1BodyFraming.UntilClose:
                _lastIsFinal = input.IsCompleted;
                result = Hold(buffer, input.IsCompleted);
                return true;

            case Http1BodyFraming.Chunked:
                return TryReadChunked(buffer, input.IsCompleted, out result);

            default:
                // No framing has a body to read (Start finished it): never here; the input waits for more, as a loop would.
                _input.AdvanceTo(buffer.Start, buffer.End);
                result = default;
                return false;
        }
    }

    /// <summary>
    /// One step of a chunked read over the input's <paramref name="buffer"/>. True with the result to return; false
    /// when the input was advanced and the next input read decides.
    /// </summary>
    private bool TryReadChunked(ReadOnlySequence<byte> buffer, bool inputCompleted, out ReadResult result)
    {
        var reader = new SequenceReader<byte>(buffer);
        if (_joined is not null || (_pending > 0 && _wantsMore && !_chunked.IsInChunkData))
        {
            // The reader holds data up to a chunk boundary and wants more: join what follows behind it.
            var appended = AppendJoined(buffer.Slice(0, _pending));
            reader.Advance(_pending);
            _pending = 0;
            while (TryDecode(ref reader, buffer, inputCompleted, out var data) && !data.IsEmpty)
            {
                appended |= AppendJoined(data);
            }
            _input.AdvanceTo(reader.Position, buffer.End);
            if (appended || _done)
            {
                _wantsMore = false;
                result = HoldJoined();
                return true;
            }
            result = default;
            return false;
        }

        if (_pending > 0)
        {
            // Inside a chunk, newly arrived data continues the slice the reader holds.
            reader.Advance(_pending);
            if (_chunked.IsInChunkData && TryDecode(ref reader, buffer, inputCompleted, out var more) && !more.IsEmpty)
            {
                _pending += more.Length;
            }
            result = Hold(buffer.Slice(0, _pending), isCompleted: false);
            return true;
        }

        if (TryDecode(ref reader, buffer, inputCompleted, out var first))
        {
            if (!first.IsEmpty)
            {
                // The framing before this slice is consumed once the reader advances past the slice's start.
                _pending = first.Length;
                result = Hold(first, isCompleted: false);
                return true;
            }
            _input.AdvanceTo(reader.Position);
            result = new ReadResult(default, isCanceled: false, isCompleted: true);
            return true;
        }
        _input.AdvanceTo(reader.Position, buffer.End);
        result = default;
        return false;
    }

    /// <summary>
    /// Runs the chunked decoder: true with the next data slice, or true with none at the end of the body (trailers
    /// collected, the exchange told); false when more input is needed. Maps framing errors and an input that ended.
    /// </summary>
    private bool TryDecode(ref SequenceReader<byte> reader, ReadOnlySequence<byte> buffer, bool inputCompleted, out ReadOnlySequence<byte> data)
    {
        bool decoded;
        try
        {
            decoded = _chunked.TryRead(ref reader, _trailerSink, out data);
        }
        catch (Http1ParseException ex)
        {
            _input.AdvanceTo(buffer.Start);
            throw _exchange.Fail(BackendFailure.ProtocolError, $"Invalid chunked response body from the backend: {ex.Reason}.");
        }
        if (decoded && data.IsEmpty)
        {
            _trailerSink.RemoveConnectionOptions();
            Finish();
        }
        else if (!decoded && inputCompleted)
        {
            _input.AdvanceTo(buffer.Start);
            throw _exchange.Fail(BackendFailure.ConnectionLost, "The backend closed the connection in the middle of a chunked response body.");
        }
        return decoded;
    }

    private bool AppendJoined(ReadOnlySequence<byte> data)
    {
        if (data.IsEmpty)
        {
            return false;
        }
        var needed = _joinedEnd - _joinedStart + checked((int)data.Length);
        if (_joined is null || _joined.Length - _joinedStart < needed)
        {
            var grown = ArrayPool<byte>.Shared.Rent(Math.Max(needed, (_joined?.Length ?? 0) * 2));
            if (_joined is not null)
            {
                _joined.AsSpan(_joinedStart, _joinedEnd - _joinedStart).CopyTo(grown);
                ArrayPool<byte>.Shared.Return(_joined);
            }
            _joinedEnd -= _joinedStart;
            _joinedStart = 0;
            _joined = grown;
        }
        data.CopyTo(_joined.AsSpan(_joinedEnd));
        _joinedEnd += (int)data.Length;
        return true;
    }

    private ReadResult HoldJoined()
    {
        _last = new ReadOnlySequence<byte>(_joined!, _joinedStart, _joinedEnd - _joinedStart);
        _lastFromJoined = true;
        return new ReadResult(_last, isCanceled: false, isCompleted: _done);
    }

    private ReadResult Hold(ReadOnlySequence<byte> data, bool isCompleted)
    {
        _last = data;
        _inputHeld = true;
        return new ReadResult(data, isCanceled: false, isCompleted);
    }

    /// <summary>
    /// What <see cref="ReadAsync"/> would return at once: the body's bytes already buffered (a small body whole, with
    /// IsCompleted, so the relay copies it without a pump), the end of the body, or false. Failures throw as a read's do.
    /// </summary>
    public override bool TryRead(out ReadResult result)
    {
        _exchange.ThrowIfFailed();
        if (!_started || _readerCompleted)
        {
            result = default;
            return false;
        }
        if (_inputHeld)
        {
            throw new InvalidOperationException("AdvanceTo was not called after the previous read.");
        }
        return TryReadWithoutWaiting(out result);
    }

    public override void AdvanceTo(SequencePosition consumed) => AdvanceTo(consumed, consumed);

    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined)
    {
        if (_lastFromJoined)
        {
            _lastFromJoined = false;
            _joinedStart += (int)_last.Slice(_last.Start, consumed).Length;
            _wantsMore = _last.Slice(_last.Start, examined).Length == _last.Length && _joinedStart < _joinedEnd;
            if (_joinedStart == _joinedEnd)
            {
                ReturnJoined();
            }
            return;
        }
        if (!_inputHeld)
        {
            // After a result we made up (end of body, canceled): nothing of the input is held.
            return;
        }
        _inputHeld = false;
        var consumedLength = _last.Slice(_last.Start, consumed).Length;
        switch (_framing)
        {
            case Http1BodyFraming.ContentLength:
                _remaining -= consumedLength;
                if (_remaining == 0)
                {
                    _input.AdvanceTo(consumed);
                    Finish();
                    return;
                }
                break;
            case Http1BodyFraming.UntilClose:
                if (_lastIsFinal && consumedLength == _last.Length)
                {
                    _input.AdvanceTo(consumed);
                    Finish();
                    return;
                }
                break;
            case Http1BodyFraming.Chunked:
                _pending -= consumedLength;
                _wantsMore = _pending > 0 && _last.Slice(_last.Start, examined).Length == _last.Length;
                break;
        }
        _input.AdvanceTo(consumed, examined);
    }

    public override void CancelPendingRead() => _input.CancelPendingRead();

    public override void Complete(Exception? exception = null)
    {
        // The input belongs to the connection: it is completed when the connection closes (always, unless the body
        // was read to its end and the exchange may be reused).
        if (_inputHeld)
        {
            _inputHeld = false;
            _input.AdvanceTo(_last.Start);
        }
        _readerCompleted = true;
        ReturnJoined();
    }

    private void ReturnJoined()
    {
        if (_joined is not null)
        {
            ArrayPool<byte>.Shared.Return(_joined);
            _joined = null;
        }
        _joinedStart = _joinedEnd = 0;
        _lastFromJoined = false;
    }

    private void Finish()
    {
        _done = true;
        _exchange.OnResponseComplete();
    }
}
