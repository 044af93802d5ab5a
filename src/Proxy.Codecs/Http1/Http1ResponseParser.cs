namespace Proxy.Codecs.Http1;

/// <summary>
/// Strict RFC 9112 response-head parser over <see cref="ReadOnlySequence{T}"/>, the client-side twin of
/// <see cref="Http1RequestParser"/>. Stateless: each call looks at the buffer from its start. Nothing reaches the
/// sink until the whole head (status line through the empty line) has arrived, so a partial head returns false
/// without side effects; the limits are enforced before the head is complete.
/// </summary>
/// <remarks>
/// Every deviation is an error (<see cref="Http1ParseException"/>; its status code is meaningless here, the
/// client answers 502 for all of them): a proxy that relays a response it framed differently from the next hop
/// is the other half of request smuggling. Where RFC 9112 lets a recipient repair a response, we reject instead:
/// <list type="bullet">
/// <item>bare LF or bare CR anywhere (§2.2 allows a lone LF; see the NOTE on <c>Http1FieldLines</c>);</item>
/// <item>obs-fold (§5.2: a proxy "MUST either discard the message and replace it with a 502 (Bad Gateway)
/// response or replace each received obs-fold with one or more SP octets"; we take the 502);</item>
/// <item>Transfer-Encoding whose final coding is not chunked (§6.3 item 4 would read until close), any coding
/// other than chunked (we would have to decode it), and Transfer-Encoding with Content-Length (§6.3 item 3 would
/// let TE win).</item>
/// </list>
/// NOTE: accepted leniencies, both harmless for framing: a status line without the SP after the code
/// ("HTTP/1.1 200\r\n"; §4's grammar wants "HTTP/1.1 200 \r\n", but the line still ends at its CRLF and §4 says a
/// client SHOULD ignore the reason phrase), and a Content-Length list or repetition of one identical value
/// ("5, 5", RFC 9110 §8.6; differing values are an error).
/// </remarks>
public static class Http1ResponseParser
{
    private const int StatusLinePrefixLength = 12; // "HTTP/1.1 " + 3 digits

    /// <summary>
    /// Parses one response head at the start of <paramref name="buffer"/>. <paramref name="requestWasHead"/> says
    /// the response answers a HEAD request, so it has no body whatever its fields say (RFC 9112 §6.3 item 1).
    /// Returns false when more data is needed (<paramref name="consumed"/> = buffer start).
    /// Throws <see cref="Http1ParseException"/> for a malformed head or an exceeded limit.
    /// </summary>
    public static bool TryParseHead(
        ReadOnlySequence<byte> buffer,
        IHttp1ResponseSink sink,
        Http1ResponseLimits limits,
        bool requestWasHead,
        out Http1ResponseHead head,
        out SequencePosition consumed)
    {
        // NOTE: parsed as one span, as Http1RequestParser does: the first segment when it holds the whole head, else a copy
        // of at most one byte past the head's limit (its scan ends, or throws, where that of the whole buffer would).
        int used;
        if (TryParseHead(buffer.FirstSpan, sink, limits, requestWasHead, out head, out used))
        {
            consumed = buffer.GetPosition(used);
            return true;
        }
        consumed = buffer.Start;
        if (buffer.IsSingleSegment)
        {
            return false;
        }
        var length = checked((int)Math.Min(buffer.Length, (long)limits.MaxHeadSize + 1));
        var copy = ArrayPool<byte>.Shared.Rent(length);
        try
        {
            buffer.Slice(0, length).CopyTo(copy);
            if (!TryParseHead(copy.AsSpan(0, length), sink, limits, requestWasHead, out head, out used))
            {
                return false;
            }
            consumed = buffer.GetPosition(used);
            return true;
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(copy);
        }
    }

    /// <summary>As above, over one span: <paramref name="consumed"/> is the head's length.</summary>
    private static bool TryParseHead(ReadOnlySpan<byte> span, IHttp1ResponseSink sink, Http1ResponseLimits limits, bool requestWasHead,
        out Http1ResponseHead head, out int consumed)
    {
        head = default;
        consumed = 0;

        // Pass 1: locate the end of the head, enforcing the limits on partial input.
        var lineEnd = span.IndexOf((byte)'\n') + 1;
        if (lineEnd == 0)
        {
            if (span.Length > limits.MaxHeadSize)
            {
                throw Http1ParseException.BadResponse("Response head too large");
            }
            return false;
        }
        if (lineEnd > limits.MaxHeadSize)
        {
            throw Http1ParseException.BadResponse("Response head too large");
        }
        if (Http1FieldLines.FindSectionEnd(span[lineEnd..], limits.MaxHeadSize - lineEnd, limits.MaxFieldCount, Http1Section.ResponseHead) < 0)
        {
            return false;
        }

        // Pass 2: parse for real; every line is known to be complete.
        var offset = 0;
        var line = Http1FieldLines.ReadLine(span, ref offset);
        var (version, status) = ParseStatusLine(line, sink);
        var fields = new Http1FramingFields();
        Http1FieldLines.ParseSection(span, ref offset, sink, ref fields);
        head = Conclude(ref fields, version, status, requestWasHead, offset);
        consumed = offset;
        return true;
    }

    /// <summary>status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4).</summary>
    private static (Http1Version, int) ParseStatusLine(ReadOnlySpan<byte> line, IHttp1ResponseSink sink)
    {
        Http1Version version;
        if (line.StartsWith("HTTP/1.1 "u8))
        {
            version = Http1Version.Http11;
        }
        else if (line.StartsWith("HTTP/1.0 "u8))
        {
            version = Http1Version.Http10;
        }
        else
        {
            // HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive (RFC 9112 §2.3); we speak 1.0 and 1.1 only.
            throw Http1ParseException.BadResponse(line.StartsWith("HTTP/"u8) ? "Unsupported HTTP version in status line" : "Invalid status line");
        }

        // status-code = 3DIGIT (RFC 9112 §4); RFC 9110 §15: "All valid status codes are within the range of 100 to 599".
        if (line.Length < StatusLinePrefixLength
            || !char.IsAsciiDigit((char)line[9]) || !char.IsAsciiDigit((char)line[10]) || !char.IsAsciiDigit((char)line[11]))
        {
            throw Http1ParseException.BadResponse("Invalid status code");
        }
        var status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
        if (status < 100 || status > 599)
        {
            throw Http1ParseException.BadResponse("Invalid status code");
        }

        ReadOnlySpan<byte> reason = default;
        if (line.Length > StatusLinePrefixLength)
        {
            if (line[StatusLinePrefixLength] != (byte)' ')
            {
                throw Http1ParseException.BadResponse("Invalid status code");
            }
            // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ): no CR, LF, NUL or other CTL.
            reason = line[(StatusLinePrefixLength + 1)..];
            if (!Http1Chars.IsValidFieldValue(reason))
            {
                throw Http1ParseException.BadResponse("Invalid character in reason phrase");
            }
        }
        sink.OnStatusLine(version, status, reason);
        return (version, status);
    }

    private static Http1ResponseHead Conclude(ref Http1FramingFields fields, Http1Version version, int status, bool requestWasHead, int headLength)
    {
        // Framing fields are checked even where they do not apply (HEAD, 1xx, 204, 304): a backend that
        // sends conflicting ones is broken, and the fields would be relayed.
        if (fields.HasTransferEncoding)
        {
            fields.CheckTransferEncoding(version);
            if (fields.HasUnknownCoding)
            {
                throw Http1ParseException.BadResponse("Unsupported transfer coding");
            }
        }

        // RFC 9112 §6.3, in its order:
        // 1. A response to HEAD, and any 1xx, 204 or 304, ends at the empty line after the fields.
        // 3./4. Transfer-Encoding: chunked (the only coding left after the checks above).
        // 6. A valid Content-Length: that many octets.
        // 8. Otherwise a response body runs until the server closes the connection.
        Http1BodyFraming framing;
        if (requestWasHead || status < 200 || status == 204 || status == 304)
        {
            framing = Http1BodyFraming.None;
        }
        else if (fields.HasTransferEncoding)
        {
            framing = Http1BodyFraming.Chunked;
        }
        else if (fields.HasContentLength)
        {
            framing = fields.ContentLength > 0 ? Http1BodyFraming.ContentLength : Http1BodyFraming.None;
        }
        else
        {
            framing = Http1BodyFraming.UntilClose;
        }

        // RFC 9112 §9.3: HTTP/1.1 persists unless "close". HTTP/1.0 persists only with "keep-alive"; we treat
        // every HTTP/1.0 response as the last one on its connection (simplest, and such backends are rare).
        var keepAlive = version == Http1Version.Http11 && !fields.ConnectionClose && framing != Http1BodyFraming.UntilClose;

        return new Http1ResponseHead
        {
            Version = version,
            StatusCode = status,
            Framing = framing,
            ContentLength = fields.ContentLength,
            KeepAlive = keepAlive,
            HeadLength = headLength,
        };
    }
}
