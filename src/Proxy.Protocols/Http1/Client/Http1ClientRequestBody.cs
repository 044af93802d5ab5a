using Proxy.Protocols.Client;
using Framing = Proxy.Protocols.Http1.Client.Http1RequestHeadWriter.BodyFraming;

namespace Proxy.Protocols.Http1.Client;

/// <summary>
/// The request body of an HTTP/1.1 client exchange, written straight into the transport's output (no copy):
/// <list type="bullet">
/// <item>content-length: bytes pass through; more than declared is an error, completing with fewer aborts the
/// exchange (RFC 9112 §6.2: the length "MUST" match, and the backend would wait for the rest);</item>
/// <item>chunked (RFC 9112 §7.1): each <see cref="Advance"/> becomes one chunk, framed in place around the caller's
/// bytes, and <see cref="Complete"/> writes the last chunk <c>0\r\n\r\n</c>.</item>
/// </list>
/// NOTE: the chunk-size is written with leading zeros to the width reserved before the caller's bytes
/// ("0005\r\nhello\r\n"): 1*HEXDIG allows them, and it keeps the data where the caller put it.
/// Once the response ended while the body is still going (a backend may answer before it read the request), flushes
/// report <see cref="FlushResult.IsCompleted"/> and send nothing more: the connection is then not reused.
/// </summary>
// Owned by the relay's request-side flow.
internal sealed class Http1ClientRequestBody : PipeWriter
{
    private const int ChunkSuffixLength = 2; // CRLF after chunk-data

    private readonly Http1ClientExchange _exchange;
    private readonly PipeWriter _output;
    private Framing _framing;
    private long _contentLength;
    private long _sent;
    private Memory<byte> _chunkMemory;
    private int _chunkPrefixLength;
    private bool _completed;
    private bool _lastChunkWritten;

    public Http1ClientRequestBody(Http1ClientExchange exchange, PipeWriter output, Framing framing, long contentLength)
    {
        _exchange = exchange;
        _output = output;
        _framing = framing;
        _contentLength = contentLength;
    }

    /// <summary>Readies the writer for the next request of its exchange (<see cref="Http1ClientExchange.Reuse"/>).</summary>
    public void Reuse(Framing framing, long contentLength)
    {
        _framing = framing;
        _contentLength = contentLength;
        _sent = 0;
        _chunkMemory = default;
        _chunkPrefixLength = 0;
        _completed = false;
        _lastChunkWritten = false;
    }

    /// <summary>True once every byte of the body (and the chunked terminator) was handed to the transport.</summary>
    public bool IsFullySent => _framing switch
    {
        Framing.None => true,
        Framing.ContentLength => _sent == _contentLength,
        _ => _lastChunkWritten,
    };

    private bool Stopped => _exchange.ResponseComplete && !_exchange.RequestComplete;

    public override Memory<byte> GetMemory(int sizeHint = 0)
    {
        ThrowIfNotWritable();
        if (_framing != Framing.Chunked)
        {
            return _framing == Framing.ContentLength ? _output.GetMemory(sizeHint) : throw new InvalidOperationException("The request has no body.");
        }
        // Reserve the chunk-size line before the caller's bytes and the CRLF after them.
        var memory = _output.GetMemory(Math.Max(sizeHint, 1) + 8 + 2 + ChunkSuffixLength);
        _chunkPrefixLength = HexDigits(memory.Length) + 2;
        _chunkMemory = memory;
        return memory[_chunkPrefixLength..^ChunkSuffixLength];
    }

    public override Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;

    public override void Advance(int bytes)
    {
        ThrowIfNotWritable();
        switch (_framing)
        {
            case Framing.ContentLength:
                if (_sent + bytes > _contentLength)
                {
                    _exchange.Abort();
                    throw new InvalidOperationException($"The request body is longer than its content-length ({_contentLength}).");
                }
                _sent += bytes;
                _output.Advance(bytes);
                break;
            case Framing.Chunked:
                if (bytes == 0)
                {
                    // A zero-size chunk would end the body (RFC 9112 §7.1: last-chunk).
                    return;
                }
                var span = _chunkMemory.Span;
                WriteChunkSize(span[..(_chunkPrefixLength - 2)], bytes);
                span[_chunkPrefixLength - 2] = (byte)'\r';
                span[_chunkPrefixLength - 1] = (byte)'\n';
                span[_chunkPrefixLength + bytes] = (byte)'\r';
                span[_chunkPrefixLength + bytes + 1] = (byte)'\n';
                _output.Advance(_chunkPrefixLength + bytes + ChunkSuffixLength);
                _chunkMemory = default;
                _sent += bytes;
                break;
            default:
                throw new InvalidOperationException("The request has no body.");
        }
    }

    public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default)
    {
        if (Stopped)
        {
            return new ValueTask<FlushResult>(new FlushResult(isCanceled: false, isCompleted: true));
        }
        return _exchange.FlushRequestAsync(cancellationToken);
    }

    public override void CancelPendingFlush() => _output.CancelPendingFlush();

    public override void Complete(Exception? exception = null)
    {
        if (!TryWriteEnd(exception))
        {
            return;
        }
        var flush = _exchange.FlushRequestAsync(CancellationToken.None);
        if (!flush.IsCompleted)
        {
            _exchange.TrackPendingFlush(flush.AsTask());
            return;
        }
        try
        {
            flush.GetAwaiter().GetResult();
        }
        catch (BackendException)
        {
            // Recorded on the exchange, so the connection is not reused; the response side reports its own outcome.
        }
    }

    public override async ValueTask CompleteAsync(Exception? exception = null)
    {
        if (TryWriteEnd(exception))
        {
            try
            {
                await _exchange.FlushRequestAsync(CancellationToken.None).ConfigureAwait(false);
            }
            catch (BackendException)
            {
                // Recorded on the exchange, so the connection is not reused; the response side reports its own outcome.
            }
        }
    }

    /// <summary>Ends the body in the transport's buffer; true when there is something to flush.</summary>
    private bool TryWriteEnd(Exception? exception)
    {
        if (_completed)
        {
            return false;
        }
        _completed = true;
        if (_exchange.Failure is not null || _exchange.RequestFailed || Stopped || _framing == Framing.None)
        {
            return false;
        }
        if (exception is not null || (_framing == Framing.ContentLength && _sent < _contentLength))
        {
            // The backend would wait for bytes that never come, or take a truncated body as whole (chunked).
            _exchange.Abort();
            return false;
        }
        if (_framing == Framing.Chunked)
        {
            // last-chunk = 1*("0") [ chunk-ext ] CRLF, then an empty trailer section (RFC 9112 §7.1).
            "0\r\n\r\n"u8.CopyTo(_output.GetSpan(5));
            _output.Advance(5);
            _lastChunkWritten = true;
        }
        return true;
    }

    private void ThrowIfNotWritable()
    {
        if (_completed)
        {
            throw new InvalidOperationException("The request body was completed.");
        }
        _exchange.ThrowIfRequestFailed();
    }

    private static int HexDigits(int value) => Math.Max(1, (32 - int.LeadingZeroCount(value) + 3) / 4);

    private static void WriteChunkSize(Span<byte> digits, int size)
    {
        for (var i = digits.Length - 1; i >= 0; i--)
        {
            digits[i] = (byte)"0123456789abcdef"[size & 0xF];
            size >>= 4;
        }
    }
}
