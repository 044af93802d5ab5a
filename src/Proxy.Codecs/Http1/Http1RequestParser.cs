using System.Text;

namespace Proxy.Codecs.Http1;

/// <summary>
/// Strict RFC 9112 request-head parser over <see cref="ReadOnlySequence{T}"/> (parsed as one span). Stateless: each call
/// looks at the buffer from its start. Nothing reaches the sink until the whole head (request line
/// through the empty line) has arrived, so a partial head returns false without side effects and
/// the caller retries with more bytes; the limits are enforced before the head is complete.
/// </summary>
public static class Http1RequestParser
{
    /// <summary>
    /// Parses one request head at the start of <paramref name="buffer"/>.
    /// Returns false when more data is needed (<paramref name="consumed"/> = buffer start).
    /// Throws <see cref="Http1ParseException"/> for a malformed head or an exceeded limit.
    /// </summary>
    public static bool TryParseHead(
        ReadOnlySequence<byte> buffer,
        IHttp1RequestSink sink,
        Http1ParserLimits limits,
        out Http1RequestHead head,
        out SequencePosition consumed)
    {
        // NOTE: parsed as one span: the first segment when it holds the whole head (nearly always), else a copy of as
        // much of the buffer as the limits let a head be. What the first segment alone shows is what the whole buffer
        // shows (a complete head, or an error: a limit a part already exceeds, the whole exceeds too); only "incomplete"
        // needs the rest. The SequenceReader pass this replaced cost ~100 ns per field (session 35).
        int used;
        if (TryParseHead(buffer.FirstSpan, sink, limits, out head, out used))
        {
            consumed = buffer.GetPosition(used);
            return true;
        }
        consumed = buffer.Start;
        if (buffer.IsSingleSegment)
        {
            return false;
        }
        // Leading empty lines, the request line and the field section, each at its limit and a little past it: a copy this
        // long ends (or throws) where the whole buffer would.
        var bound = 2L * (limits.MaxRequestLineSize + 2) + limits.MaxHeadersTotalSize + 2;
        var length = checked((int)Math.Min(buffer.Length, bound));
        var copy = ArrayPool<byte>.Shared.Rent(length);
        try
        {
            buffer.Slice(0, length).CopyTo(copy);
            if (!TryParseHead(copy.AsSpan(0, length), sink, limits, out head, out used))
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

    /// <summary>As above, over one span: <paramref name="consumed"/> is the head's length (with leading empty lines).</summary>
    private static bool TryParseHead(ReadOnlySpan<byte> span, IHttp1RequestSink sink, Http1ParserLimits limits, out Http1RequestHead head, out int consumed)
    {
        head = default;
        consumed = 0;
        var position = 0;

        // RFC 9112 §2.2: "a server that is expecting to receive and parse a request-line SHOULD
        // ignore at least one empty line (CRLF) received prior to the request-line."
        while (position < span.Length && span[position] == (byte)'\r')
        {
            if (position + 1 >= span.Length)
            {
                return false;
            }
            if (span[position + 1] != (byte)'\n')
            {
                throw Http1ParseException.BadRequest("Bare CR");
            }
            position += 2;
            if (position > limits.MaxRequestLineSize)
            {
                throw new Http1ParseException(414, "Request line too long");
            }
        }
        var headStart = position;

        // Pass 1: locate the end of the head, enforcing the limits on partial input.
        var lineLength = span[headStart..].IndexOf((byte)'\n');
        if (lineLength < 0)
        {
            if (span.Length - headStart > limits.MaxRequestLineSize + 1)
            {
                throw new Http1ParseException(414, "Request line too long");
            }
            return false;
        }
        if (lineLength - 1 > limits.MaxRequestLineSize)
        {
            throw new Http1ParseException(414, "Request line too long");
        }
        if (Http1FieldLines.FindSectionEnd(span[(headStart + lineLength + 1)..], limits.MaxHeadersTotalSize, limits.MaxHeaderCount) < 0)
        {
            return false;
        }

        // Pass 2: parse for real; every line is known to be complete.
        var offset = headStart;
        var line = Http1FieldLines.ReadLine(span, ref offset);
        var framing = new FramingState();
        var (version, form, isConnect) = ParseRequestLine(line, sink, ref framing);
        Http1FieldLines.ParseSection(span, ref offset, sink, ref framing);
        head = framing.Conclude(version, form, isConnect, offset - headStart);
        consumed = offset;
        return true;
    }

    /// <summary>request-line = method SP request-target SP HTTP-version (RFC 9112 §3).</summary>
    private static (Http1Version, Http1TargetForm, bool) ParseRequestLine(ReadOnlySpan<byte> line, IHttp1RequestSink sink, ref FramingState framing)
    {
        var sp1 = line.IndexOf((byte)' ');
        if (sp1 <= 0)
        {
            throw Http1ParseException.BadRequest("Invalid request line");
        }
        var method = line[..sp1];
        if (!Http1Chars.IsToken(method))
        {
            throw Http1ParseException.BadRequest("Invalid method");
        }
        var rest = line[(sp1 + 1)..];
        var sp2 = rest.IndexOf((byte)' ');
        if (sp2 < 0)
        {
            // No version at all: not an HTTP/1.x request line (HTTP/0.9 is not supported).
            throw Http1ParseException.UnrecognizedProtocol("Invalid request line");
        }
        if (sp2 == 0)
        {
            // A doubled SP (we do not take §3's lenient whitespace option).
            throw Http1ParseException.BadRequest("Invalid request line");
        }
        var target = rest[..sp2];
        var versionText = rest[(sp2 + 1)..];
        if (!Http1Chars.IsValidTarget(target))
        {
            throw Http1ParseException.BadRequest("Invalid request target");
        }
        var version = ParseVersion(versionText);
        var isConnect = method.SequenceEqual("CONNECT"u8);
        var form = ClassifyTarget(method, target, isConnect);
        if (form == Http1TargetForm.Absolute)
        {
            var authority = Http1RequestTarget.CheckAbsoluteAuthority(target, out var defaultPort);
            framing.ExpectHost(authority, defaultPort);
        }
        sink.OnRequestLine(method, target, version, form);
        return (version, form, isConnect);
    }

    /// <summary>HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3); case-sensitive.</summary>
    private static Http1Version ParseVersion(ReadOnlySpan<byte> text)
    {
        if (text.SequenceEqual("HTTP/1.1"u8))
        {
            return Http1Version.Http11;
        }
        if (text.SequenceEqual("HTTP/1.0"u8))
        {
            return Http1Version.Http10;
        }
        if (text.Length == 8 && text.StartsWith("HTTP/"u8) && char.IsAsciiDigit((char)text[5]) && text[6] == (byte)'.' && char.IsAsciiDigit((char)text[7]))
        {
            throw new Http1ParseException(505, "HTTP version not supported");
        }
        throw Http1ParseException.UnrecognizedProtocol("Invalid HTTP version");
    }

    private static Http1TargetForm ClassifyTarget(ReadOnlySpan<byte> method, ReadOnlySpan<byte> target, bool isConnect)
    {
        // RFC 9112 §3.2.3: authority-form is only used for CONNECT, and CONNECT only uses it.
        if (isConnect)
        {
            if (!Http1RequestTarget.IsAuthorityForm(target))
            {
                throw Http1ParseException.BadRequest("CONNECT requires authority-form target");
            }
            return Http1TargetForm.Authority;
        }
        if (target[0] == (byte)'/')
        {
            return Http1TargetForm.Origin;
        }
        // RFC 9112 §3.2.4: asterisk-form is only used for a server-wide OPTIONS request.
        if (target.Length == 1 && target[0] == (byte)'*')
        {
            if (!method.SequenceEqual("OPTIONS"u8))
            {
                throw Http1ParseException.BadRequest("Asterisk-form target requires OPTIONS");
            }
            return Http1TargetForm.Asterisk;
        }
        // RFC 9112 §3.2.2: "a server MUST accept the use of the absolute-form in requests".
        if (Http1RequestTarget.IsAbsoluteForm(target))
        {
            return Http1TargetForm.Absolute;
        }
        throw Http1ParseException.BadRequest("Invalid request target");
    }

    /// <summary>Accumulates the framing and connection-control fields of one request head (RFC 9112 §6, §9).</summary>
    private struct FramingState : IHttp1FieldObserver
    {
        private Http1FramingFields _fields;
        private bool _expectContinue;
        private bool _teTrailers;
        private bool _upgrade;
        private int _hostCount;
        // An absolute-form target's authority and its scheme's default port (copied: the line's buffer is reused).
        private byte[]? _targetAuthority;
        private byte[]? _targetDefaultPort;

        public FramingState()
        {
            _fields = new Http1FramingFields();
        }

        /// <summary>The target is absolute-form: a Host field must name the same authority.</summary>
        public void ExpectHost(ReadOnlySpan<byte> authority, ReadOnlySpan<byte> defaultPort)
        {
            _targetAuthority = authority.ToArray();
            _targetDefaultPort = defaultPort.ToArray();
        }

        public void Observe(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
        {
            if (_fields.TryObserve(name, value))
            {
                return;
            }
            if (Ascii.EqualsIgnoreCase(name, "host"u8))
            {
                _hostCount++;
                if (!Http1RequestTarget.IsValidHost(value))
                {
                    // RFC 9112 §3.2: 400 for "a Host header field with an invalid field value".
                    throw Http1ParseException.BadRequest("Invalid Host header");
                }
                // NOTE: RFC 9112 §3.2.2 lets a server ignore Host here; ASP.NET Core apps read Request.Host from the
                // Host field, so a different one would be served (and forwarded) as the host. Kestrel answers 400 too.
                if (_targetAuthority is not null && !Http1RequestTarget.AuthorityEquals(value, _targetAuthority, _targetDefaultPort))
                {
                    throw Http1ParseException.BadRequest("Host header does not match the request target");
                }
            }
            else if (Ascii.EqualsIgnoreCase(name, "expect"u8))
            {
                _expectContinue |= Ascii.EqualsIgnoreCase(value, "100-continue"u8);
            }
            else if (Ascii.EqualsIgnoreCase(name, "te"u8))
            {
                while (Http1FieldLines.NextListElement(ref value, out var coding))
                {
                    _teTrailers |= Ascii.EqualsIgnoreCase(coding, "trailers"u8);
                }
            }
            else if (Ascii.EqualsIgnoreCase(name, "upgrade"u8))
            {
                _upgrade = true;
            }
        }

        public Http1RequestHead Conclude(Http1Version version, Http1TargetForm form, bool isConnect, int headLength)
        {
            // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, or with more than one.
            if (_hostCount > 1 || (_hostCount == 0 && version == Http1Version.Http11))
            {
                throw Http1ParseException.BadRequest(_hostCount > 1 ? "Multiple Host headers" : "Missing Host header");
            }

            var framing = Http1BodyFraming.None;
            if (_fields.HasTransferEncoding)
            {
                _fields.CheckTransferEncoding(version);
                // RFC 9112 §6.1: a transfer coding we do not understand SHOULD get 501.
                if (_fields.HasUnknownCoding)
                {
                    throw new Http1ParseException(501, "Unsupported transfer coding");
                }
                framing = Http1BodyFraming.Chunked;
            }
            else if (_fields.ContentLength > 0)
            {
                framing = Http1BodyFraming.ContentLength;
            }

            // RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
            var keepAlive = version == Http1Version.Http11
                ? !_fields.ConnectionClose
                : _fields.ConnectionKeepAlive && !_fields.ConnectionClose;

            return new Http1RequestHead
            {
                Version = version,
                TargetForm = form,
                Framing = framing,
                ContentLength = _fields.ContentLength,
                KeepAlive = keepAlive,
                // RFC 9110 §10.1.1: "MUST ignore that expectation" in an HTTP/1.0 request.
                ExpectContinue = _expectContinue && version == Http1Version.Http11 && framing != Http1BodyFraming.None,
                AcceptsTrailers = _teTrailers,
                HasUpgrade = _upgrade && !isConnect,
                HeadLength = headLength,
            };
        }
    }
}
