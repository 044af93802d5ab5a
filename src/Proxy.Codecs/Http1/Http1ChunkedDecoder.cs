namespace Proxy.Codecs.Http1;

/// <summary>
/// Incremental decoder for the chunked transfer coding (RFC 9112 §7.1):
/// <code>
/// chunked-body   = *chunk last-chunk trailer-section CRLF
/// chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
/// chunk-size     = 1*HEXDIG
/// last-chunk     = 1*("0") [ chunk-ext ] CRLF
/// </code>
/// Each call consumes whole framing elements only (a size line, a CRLF, the trailer section), so
/// a partial element stays unread and the caller retries when more bytes arrive. Chunk data is
/// returned as slices of the input, never copied.
/// </summary>
// Owned by the single reader of one message body (a request body on the server, a response body on the client).
public struct Http1ChunkedDecoder
{
    /// <summary>Longest chunk-size line we accept, extensions included (they are skipped, but bounded).</summary>
    public const int MaxChunkLineLength = 4096;

    private enum State : byte
    {
        Size,
        Data,
        DataCrlf,
        Trailers,
        Done,
    }

    private readonly int _maxTrailerSize;
    private readonly int _maxTrailerCount;
    private State _state;
    private long _remaining;

    public Http1ChunkedDecoder(Http1ParserLimits limits)
        : this(limits.MaxHeadersTotalSize, limits.MaxHeaderCount)
    {
    }

    /// <summary>A decoder whose trailer section may hold <paramref name="maxTrailerSize"/> octets in <paramref name="maxTrailerCount"/> fields.</summary>
    public Http1ChunkedDecoder(int maxTrailerSize, int maxTrailerCount)
    {
        _maxTrailerSize = maxTrailerSize;
        _maxTrailerCount = maxTrailerCount;
    }

    /// <summary>True once the last chunk and the trailer section have been consumed.</summary>
    public readonly bool IsComplete => _state == State.Done;

    /// <summary>True inside a chunk's data: the next input bytes are data, so a read continues the previous data slice.</summary>
    public readonly bool IsInChunkData => _state == State.Data;

    /// <summary>
    /// Consumes framing from <paramref name="reader"/> until body bytes are available, and returns
    /// them in <paramref name="data"/> (already consumed from the reader). Returns true with
    /// non-empty data, or true with empty data once <see cref="IsComplete"/>; false when more input
    /// is needed. Trailer fields go to <paramref name="trailers"/> once the section is complete.
    /// Throws <see cref="Http1ParseException"/> (400/431) on malformed framing.
    /// </summary>
    public bool TryRead(ref SequenceReader<byte> reader, IHttp1FieldSink? trailers, out ReadOnlySequence<byte> data)
    {
        data = default;
        while (true)
        {
            switch (_state)
            {
                case State.Size:
                    if (!TryReadSizeLine(ref reader))
                    {
                        return false;
                    }
                    break;

                case State.Data:
                    if (reader.End)
                    {
                        return false;
                    }
                    var take = Math.Min(_remaining, reader.Remaining);
                    data = reader.UnreadSequence.Slice(0, take);
                    reader.Advance(take);
                    _remaining -= take;
                    if (_remaining == 0)
                    {
                        _state = State.DataCrlf;
                    }
                    return true;

                case State.DataCrlf:
                    // chunk = ... chunk-data CRLF: strictly CRLF, nothing else.
                    if (!reader.TryPeek(out var cr))
                    {
                        return false;
                    }
                    if (cr != (byte)'\r')
                    {
                        throw Http1ParseException.BadRequest("Missing CRLF after chunk data");
                    }
                    if (!reader.TryPeek(1, out var lf))
                    {
                        return false;
                    }
                    if (lf != (byte)'\n')
                    {
                        throw Http1ParseException.BadRequest("Missing CRLF after chunk data");
                    }
                    reader.Advance(2);
                    _state = State.Size;
                    break;

                case State.Trailers:
                    if (!Http1FieldLines.TryFindSectionEnd(reader, _maxTrailerSize, _maxTrailerCount, Http1Section.Trailers))
                    {
                        return false;
                    }
                    byte[]? scratch = null;
                    try
                    {
                        Http1FieldLines.ParseSection(ref reader, trailers, ref scratch);
                    }
                    finally
                    {
                        if (scratch is not null)
                        {
                            ArrayPool<byte>.Shared.Return(scratch);
                        }
                    }
                    _state = State.Done;
                    return true;

                case State.Done:
                    return true;
            }
        }
    }

    private bool TryReadSizeLine(ref SequenceReader<byte> reader)
    {
        var probe = reader;
        if (!probe.TryAdvanceTo((byte)'\n'))
        {
            if (reader.Remaining > MaxChunkLineLength)
            {
                throw Http1ParseException.BadRequest("Chunk size line too long");
            }
            return false;
        }
        if (probe.Consumed - reader.Consumed > MaxChunkLineLength)
        {
            throw Http1ParseException.BadRequest("Chunk size line too long");
        }
        byte[]? scratch = null;
        try
        {
            var line = Http1FieldLines.ReadLine(ref reader, ref scratch);
            _remaining = ParseSizeLine(line);
        }
        finally
        {
            if (scratch is not null)
            {
                ArrayPool<byte>.Shared.Return(scratch);
            }
        }
        _state = _remaining == 0 ? State.Trailers : State.Data;
        return true;
    }

    private static long ParseSizeLine(ReadOnlySpan<byte> line)
    {
        long size = 0;
        var i = 0;
        for (; i < line.Length; i++)
        {
            var digit = HexValue(line[i]);
            if (digit < 0)
            {
                break;
            }
            // Overflow guard: another hex digit must not push the size past long.MaxValue.
            if (size > (long.MaxValue >> 4))
            {
                throw Http1ParseException.BadRequest("Chunk size overflow");
            }
            size = (size << 4) | (uint)digit;
        }
        if (i == 0)
        {
            throw Http1ParseException.BadRequest("Invalid chunk size");
        }
        // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ): skipped, but it must
        // start with BWS or ";" and must not carry CTLs (CR/LF/NUL can never appear here).
        var ext = line[i..];
        var trimmed = Http1Chars.TrimOws(ext);
        if (!trimmed.IsEmpty && trimmed[0] != (byte)';')
        {
            throw Http1ParseException.BadRequest("Invalid chunk size");
        }
        if (!Http1Chars.IsValidFieldValue(ext))
        {
            throw Http1ParseException.BadRequest("Invalid chunk extension");
        }
        return size;
    }

    private static int HexValue(byte b) => b switch
    {
        >= (byte)'0' and <= (byte)'9' => b - '0',
        >= (byte)'a' and <= (byte)'f' => b - 'a' + 10,
        >= (byte)'A' and <= (byte)'F' => b - 'A' + 10,
        _ => -1,
    };
}
