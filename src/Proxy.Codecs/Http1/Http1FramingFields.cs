using System.Text;

namespace Proxy.Codecs.Http1;

/// <summary>
/// Accumulates the framing and persistence fields of one message head, request or response
/// (Content-Length, Transfer-Encoding, Connection: RFC 9112 §6, §9.3), and applies the checks both
/// directions share. Each parser adds its own rules on top (Host for requests, status codes for
/// responses).
/// </summary>
// Owned by the parser call that reads one head.
internal struct Http1FramingFields : IHttp1FieldObserver
{
    private long _contentLength;
    private bool _hasContentLength;
    private bool _hasTransferEncoding;
    private bool _chunkedFinal;
    private int _chunkedCount;
    private bool _unknownCoding;

    public Http1FramingFields()
    {
        _contentLength = -1;
    }

    /// <summary>The declared Content-Length, or -1 when absent.</summary>
    public readonly long ContentLength => _hasContentLength ? _contentLength : -1;

    public readonly bool HasContentLength => _hasContentLength;

    public readonly bool HasTransferEncoding => _hasTransferEncoding;

    /// <summary>A Transfer-Encoding coding other than chunked was listed (gzip, identity...).</summary>
    public readonly bool HasUnknownCoding => _unknownCoding;

    /// <summary>"Connection: close" was listed.</summary>
    public bool ConnectionClose { get; private set; }

    /// <summary>"Connection: keep-alive" was listed.</summary>
    public bool ConnectionKeepAlive { get; private set; }

    void IHttp1FieldObserver.Observe(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) => TryObserve(name, value);

    /// <summary>Observes one field; true when it was one of the framing or persistence fields.</summary>
    public bool TryObserve(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        if (Ascii.EqualsIgnoreCase(name, "content-length"u8))
        {
            ObserveContentLength(value);
            return true;
        }
        if (Ascii.EqualsIgnoreCase(name, "transfer-encoding"u8))
        {
            ObserveTransferEncoding(value);
            return true;
        }
        if (Ascii.EqualsIgnoreCase(name, "connection"u8))
        {
            while (Http1FieldLines.NextListElement(ref value, out var option))
            {
                if (Ascii.EqualsIgnoreCase(option, "close"u8))
                {
                    ConnectionClose = true;
                }
                else if (Ascii.EqualsIgnoreCase(option, "keep-alive"u8))
                {
                    ConnectionKeepAlive = true;
                }
            }
            return true;
        }
        return false;
    }

    /// <summary>
    /// The checks every message with Transfer-Encoding must pass; throws 400 otherwise. The caller
    /// decides what to do with a coding other than chunked (<see cref="HasUnknownCoding"/>).
    /// </summary>
    public readonly void CheckTransferEncoding(Http1Version version)
    {
        // RFC 9112 §6.1: "A recipient MUST treat [an HTTP/1.0 message with Transfer-Encoding] as if
        // the framing is faulty". RFC 9112 §6.3 item 3 lets a recipient process TE+CL as chunked; we
        // take the stricter path of rejecting both (a smuggling signature).
        if (version == Http1Version.Http10)
        {
            throw Http1ParseException.BadRequest("Transfer-Encoding in an HTTP/1.0 message");
        }
        if (_hasContentLength)
        {
            throw Http1ParseException.BadRequest("Both Transfer-Encoding and Content-Length");
        }
        // RFC 9112 §6.3 item 4: chunked not final -> invalid framing (requests: "MUST respond with
        // 400 and close"). RFC 9112 §6.1: chunked MUST NOT be applied more than once.
        if (!_chunkedFinal || _chunkedCount > 1)
        {
            throw Http1ParseException.BadRequest("Chunked must be the final transfer coding, applied once");
        }
    }

    private void ObserveContentLength(ReadOnlySpan<byte> value)
    {
        // Content-Length = 1*DIGIT (RFC 9110 §8.6). A list or repeated field with identical
        // values may be accepted as one (RFC 9110 §8.6, RFC 9112 §6.3 item 5); differing values
        // or anything else is "invalid Content-Length": an error, and the connection closes.
        var any = false;
        while (Http1FieldLines.NextListElement(ref value, out var element))
        {
            any = true;
            var parsed = ParseDecimal(element);
            if (_hasContentLength && parsed != _contentLength)
            {
                throw Http1ParseException.BadRequest("Conflicting Content-Length values");
            }
            _hasContentLength = true;
            _contentLength = parsed;
        }
        if (!any)
        {
            throw Http1ParseException.BadRequest("Invalid Content-Length");
        }
    }

    private static long ParseDecimal(ReadOnlySpan<byte> digits)
    {
        long result = 0;
        foreach (var b in digits)
        {
            var d = b - (byte)'0';
            if ((uint)d > 9)
            {
                throw Http1ParseException.BadRequest("Invalid Content-Length");
            }
            if (result > (long.MaxValue - d) / 10)
            {
                throw Http1ParseException.BadRequest("Content-Length overflow");
            }
            result = result * 10 + d;
        }
        return result;
    }

    private void ObserveTransferEncoding(ReadOnlySpan<byte> value)
    {
        _hasTransferEncoding = true;
        while (Http1FieldLines.NextListElement(ref value, out var coding))
        {
            if (Ascii.EqualsIgnoreCase(coding, "chunked"u8))
            {
                _chunkedCount++;
                _chunkedFinal = true;
            }
            else
            {
                _unknownCoding = true;
                _chunkedFinal = false;
            }
        }
    }
}
