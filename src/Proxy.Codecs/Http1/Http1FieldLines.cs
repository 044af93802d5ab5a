namespace Proxy.Codecs.Http1;

/// <summary>
/// Line and field-line primitives shared by the request head and the chunked trailer section.
///
/// NOTE: bare LF. RFC 9112 §2.2 lets a recipient accept a lone LF as a line terminator; we
/// reject it (400) instead, because a front end and a back end that disagree on line endings is
/// the classic request-smuggling setup. A bare CR is rejected too (§2.2: "MUST either consider
/// the message invalid or replace each bare CR with SP").
/// </summary>
internal static class Http1FieldLines
{
    /// <summary>
    /// Scans (without side effects) for the empty line that ends a field section starting at the start of
    /// <paramref name="span"/>: the offset just past that line, or -1 when the section is incomplete. Throws 431 once the
    /// section is known to exceed the limits, so a client cannot make us buffer without bound.
    /// </summary>
    public static int FindSectionEnd(ReadOnlySpan<byte> span, int maxTotalSize, int maxCount, Http1Section section = Http1Section.RequestHeaders)
    {
        var count = 0;
        var position = 0;
        while (true)
        {
            var lineLength = span[position..].IndexOf((byte)'\n');
            if (lineLength < 0)
            {
                if (span.Length > maxTotalSize)
                {
                    throw new Http1ParseException(431, TooLarge(section));
                }
                return -1;
            }
            position += lineLength + 1;
            if (position > maxTotalSize)
            {
                throw new Http1ParseException(431, TooLarge(section));
            }
            if (lineLength <= 1)
            {
                // "" (bare LF, rejected by the parser) or "\r": the end of the section.
                return position;
            }
            if (++count > maxCount)
            {
                throw new Http1ParseException(431, TooMany(section));
            }
        }
    }

    /// <summary>As <see cref="FindSectionEnd"/>, for a section starting at <paramref name="reader"/>: false when incomplete.</summary>
    public static bool TryFindSectionEnd(SequenceReader<byte> reader, int maxTotalSize, int maxCount, Http1Section section = Http1Section.RequestHeaders)
    {
        var unread = reader.UnreadSequence;
        if (unread.IsSingleSegment)
        {
            return FindSectionEnd(unread.FirstSpan, maxTotalSize, maxCount, section) >= 0;
        }
        // NOTE: a copy of at most one byte past the limit: its scan ends, or throws, exactly where that of the whole would.
        var length = checked((int)Math.Min(unread.Length, (long)maxTotalSize + 1));
        var copy = ArrayPool<byte>.Shared.Rent(length);
        try
        {
            unread.Slice(0, length).CopyTo(copy);
            return FindSectionEnd(copy.AsSpan(0, length), maxTotalSize, maxCount, section) >= 0;
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(copy);
        }
    }

    private static string TooLarge(Http1Section section) => section switch
    {
        Http1Section.ResponseHead => "Response head too large",
        Http1Section.Trailers => "Trailer section too large",
        _ => "Request header fields too large",
    };

    private static string TooMany(Http1Section section) => section switch
    {
        Http1Section.ResponseHead => "Too many response header fields",
        Http1Section.Trailers => "Too many trailer fields",
        _ => "Too many request header fields",
    };

    /// <summary>
    /// Reads one line known to be complete and returns it without its CRLF. Multi-segment lines are
    /// copied into <paramref name="scratch"/> (rented on demand; the caller returns it).
    /// </summary>
    public static ReadOnlySpan<byte> ReadLine(ref SequenceReader<byte> reader, ref byte[]? scratch)
    {
        if (!reader.TryReadTo(out ReadOnlySequence<byte> line, (byte)'\n'))
        {
            throw new InvalidOperationException("ReadLine called on an incomplete line.");
        }
        ReadOnlySpan<byte> span;
        if (line.IsSingleSegment)
        {
            span = line.FirstSpan;
        }
        else
        {
            var length = checked((int)line.Length);
            if (scratch is null || scratch.Length < length)
            {
                if (scratch is not null)
                {
                    ArrayPool<byte>.Shared.Return(scratch);
                }
                scratch = ArrayPool<byte>.Shared.Rent(length);
            }
            line.CopyTo(scratch);
            span = scratch.AsSpan(0, length);
        }
        return WithoutCr(span);
    }

    /// <summary>
    /// Reads the line at <paramref name="offset"/> of <paramref name="span"/>, known to be complete, and returns it without
    /// its CRLF; <paramref name="offset"/> moves past its LF.
    /// </summary>
    public static ReadOnlySpan<byte> ReadLine(ReadOnlySpan<byte> span, ref int offset)
    {
        var rest = span[offset..];
        var length = rest.IndexOf((byte)'\n');
        if (length < 0)
        {
            throw new InvalidOperationException("ReadLine called on an incomplete line.");
        }
        offset += length + 1;
        return WithoutCr(rest[..length]);
    }

    /// <summary>A line without its LF: without its CR too, which must be there.</summary>
    private static ReadOnlySpan<byte> WithoutCr(ReadOnlySpan<byte> line)
    {
        // RFC 9112 §2.2: lines end with CRLF; see the NOTE on bare LF above.
        if (line.IsEmpty || line[^1] != (byte)'\r')
        {
            throw Http1ParseException.BadRequest("Bare LF line terminator");
        }
        return line[..^1];
    }

    /// <summary>field-line = field-name ":" OWS field-value OWS (RFC 9112 §5).</summary>
    public static void ParseFieldLine(ReadOnlySpan<byte> line, out ReadOnlySpan<byte> name, out ReadOnlySpan<byte> value)
    {
        // RFC 9112 §5.2: obs-fold (a line starting with SP/HTAB) is not accepted; we take the
        // "reject with 400" option. This also covers whitespace before the first field (§2.2).
        if (Http1Chars.IsOws(line[0]))
        {
            throw Http1ParseException.BadRequest("Obsolete line folding");
        }
        var colon = line.IndexOf((byte)':');
        if (colon < 0)
        {
            throw Http1ParseException.BadRequest("Header field without colon");
        }
        name = line[..colon];
        if (name.IsEmpty)
        {
            throw Http1ParseException.BadRequest("Empty header field name");
        }
        // RFC 9112 §5.1: "A server MUST reject, with a response status code of 400 (Bad Request),
        // any received request message that contains whitespace between a header field name and colon."
        if (Http1Chars.IsOws(name[^1]))
        {
            throw Http1ParseException.BadRequest("Whitespace between header field name and colon");
        }
        if (!Http1Chars.IsToken(name))
        {
            throw Http1ParseException.BadRequest("Invalid header field name");
        }
        value = Http1Chars.TrimOws(line[(colon + 1)..]);
        // RFC 9110 §5.5: field values never contain CR, LF or NUL; other CTLs are invalid too.
        if (!Http1Chars.IsValidFieldValue(value))
        {
            throw Http1ParseException.BadRequest("Invalid character in header field value");
        }
    }

    /// <summary>Parses a complete field section (located by <see cref="TryFindSectionEnd"/>) into <paramref name="sink"/>, consuming the empty line.</summary>
    public static void ParseSection(ref SequenceReader<byte> reader, IHttp1FieldSink? sink, ref byte[]? scratch)
    {
        while (true)
        {
            var line = ReadLine(ref reader, ref scratch);
            if (line.IsEmpty)
            {
                return;
            }
            ParseFieldLine(line, out var name, out var value);
            sink?.OnField(name, value);
        }
    }

    /// <summary>
    /// Parses the complete field section at <paramref name="offset"/> of <paramref name="span"/> (located by
    /// <see cref="FindSectionEnd"/>), showing each field to <paramref name="observer"/> (a head's framing state) before
    /// <paramref name="sink"/>, so an invalid framing field throws before the sink sees it. <paramref name="offset"/> moves
    /// past the empty line.
    /// </summary>
    public static void ParseSection<TObserver>(ReadOnlySpan<byte> span, ref int offset, IHttp1FieldSink? sink, ref TObserver observer)
        where TObserver : struct, IHttp1FieldObserver
    {
        while (true)
        {
            var line = ReadLine(span, ref offset);
            if (line.IsEmpty)
            {
                return;
            }
            ParseFieldLine(line, out var name, out var value);
            observer.Observe(name, value);
            sink?.OnField(name, value);
        }
    }

    /// <summary>Iterates over a comma-separated list (RFC 9110 §5.6.1): the next non-empty element goes to <paramref name="element"/>; false at the end.</summary>
    public static bool NextListElement(ref ReadOnlySpan<byte> list, out ReadOnlySpan<byte> element)
    {
        while (!list.IsEmpty)
        {
            var comma = list.IndexOf((byte)',');
            ReadOnlySpan<byte> item;
            if (comma < 0)
            {
                item = list;
                list = default;
            }
            else
            {
                item = list[..comma];
                list = list[(comma + 1)..];
            }
            item = Http1Chars.TrimOws(item);
            if (!item.IsEmpty)
            {
                element = item;
                return true;
            }
        }
        element = default;
        return false;
    }
}

/// <summary>Sees every field of a section as it is parsed (the framing state of a message head).</summary>
internal interface IHttp1FieldObserver
{
    void Observe(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value);
}

/// <summary>Which field section a limit applies to: names the section in the error message.</summary>
internal enum Http1Section : byte
{
    RequestHeaders,
    ResponseHead,
    Trailers,
}
