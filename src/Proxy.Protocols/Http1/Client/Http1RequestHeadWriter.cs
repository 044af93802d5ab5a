using System.Diagnostics;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http1.Client;

/// <summary>
/// Builds the HTTP/1.1 request head a client connection sends, from the validated parts of a
/// <see cref="BackendRequest"/> only (RFC 9112 §3: request-line = method SP request-target SP HTTP-version):
/// <c>METHOD SP path-and-query SP HTTP/1.1</c>, then <c>host</c> first (RFC 9112 §3.2: "A client MUST send a Host
/// header field in all HTTP/1.1 request messages"), then the fields, then the framing field we choose.
/// Everything is checked before a byte is written, so a bad request leaves the connection usable.
/// </summary>
internal static class Http1RequestHeadWriter
{
    /// <summary>How the request body is framed on the wire (RFC 9112 §6.2, §7.1).</summary>
    public enum BodyFraming : byte
    {
        None,
        ContentLength,
        Chunked,
    }

    /// <summary>
    /// Validates <paramref name="request"/> and measures its head; throws <see cref="ArgumentException"/> on the first
    /// invalid part. The framing: content-length when <see cref="BackendRequest.ContentLength"/> is set (also 0 without a
    /// body), else chunked when <see cref="BackendRequest.HasBody"/>.
    /// </summary>
    /// <param name="skipsFields">True when a field is left out (<see cref="IsSkipped"/>): <see cref="Write"/> checks each
    /// field again only then (the forwarder strips those fields itself, so most requests have none).</param>
    /// <param name="validAuthority">An authority string already found valid (the connection's last one), or null: the
    /// same string object is not checked again (a connection's requests mostly carry one authority string).</param>
    public static int Measure(BackendRequest request, out BodyFraming framing, out bool skipsFields, string? validAuthority = null)
    {
        // RFC 9112 §3.1: method = token.
        if (!HttpFieldRules.IsToken(request.Method))
        {
            throw new ArgumentException("The request method is not a token.", nameof(request));
        }
        // RFC 9112 §3.2.1: origin-form = absolute-path [ "?" query ]; no SP, CTL or non-ASCII can be sent as is.
        var target = request.PathAndQuery;
        if (string.IsNullOrEmpty(target) || target[0] != '/' || target.AsSpan().IndexOfAnyExceptInRange('!', '~') >= 0)
        {
            throw new ArgumentException("The request target must be an origin-form path of visible ASCII.", nameof(request));
        }
        if (!ReferenceEquals(request.Authority, validAuthority) && !IsValidAuthority(request.Authority))
        {
            throw new ArgumentException("The authority is not a valid Host value (host[:port], no userinfo).", nameof(request));
        }
        if (request.ContentLength is { } declared && (declared < 0 || (declared > 0 && !request.HasBody)))
        {
            throw new ArgumentException("The declared content-length does not match the request's body.", nameof(request));
        }

        var length = request.Method.Length + 1 + target.Length + " HTTP/1.1\r\n".Length + "host: \r\n".Length + request.Authority.Length;
        var fields = request.Headers;
        skipsFields = false;
        for (var i = request.FieldsStart; i < fields.Count; i++)
        {
            var (name, value) = fields[i];
            if (!HttpFieldRules.IsToken(name))
            {
                throw new ArgumentException($"Invalid request header name '{name}'.", nameof(request));
            }
            // RFC 9110 §5.5: field values never contain CR, LF or NUL (nor, here, other CTLs or anything beyond Latin-1).
            if (!Http1HeadWriter.IsFieldValue(value))
            {
                throw new ArgumentException($"Invalid character in the value of request header '{name}'.", nameof(request));
            }
            if (!IsSkipped(name, value))
            {
                length += name.Length + value.Length + 4;
            }
            else
            {
                skipsFields = true;
            }
        }

        if (ContentLengthToSend(request) is { } contentLength)
        {
            framing = request.HasBody ? BodyFraming.ContentLength : BodyFraming.None;
            length += "content-length: \r\n".Length + CountDigits(contentLength);
        }
        else if (request.HasBody)
        {
            framing = BodyFraming.Chunked;
            length += "transfer-encoding: chunked\r\n".Length;
        }
        else
        {
            framing = BodyFraming.None;
        }
        return length + 2;
    }

    /// <summary>Writes the head <see cref="Measure"/> measured into <paramref name="span"/> (exactly that long), with its framing and skipsFields.</summary>
    public static void Write(Span<byte> span, BackendRequest request, BodyFraming framing, bool skipsFields)
    {
        var at = Encoding.ASCII.GetBytes(request.Method, span);
        span[at++] = (byte)' ';
        at += Encoding.ASCII.GetBytes(request.PathAndQuery, span[at..]);
        at += Copy(" HTTP/1.1\r\nhost: "u8, span[at..]);
        at += Encoding.ASCII.GetBytes(request.Authority, span[at..]);
        at += Copy("\r\n"u8, span[at..]);
        var fields = request.Headers;
        for (var i = request.FieldsStart; i < fields.Count; i++)
        {
            var (name, value) = fields[i];
            if (skipsFields && IsSkipped(name, value))
            {
                continue;
            }
            at += Encoding.Latin1.GetBytes(name, span[at..]);
            at += Copy(": "u8, span[at..]);
            at += Encoding.Latin1.GetBytes(value, span[at..]);
            at += Copy("\r\n"u8, span[at..]);
        }
        if (ContentLengthToSend(request) is { } contentLength)
        {
            at += Copy("content-length: "u8, span[at..]);
            contentLength.TryFormat(span[at..], out var written);
            at += written;
            at += Copy("\r\n"u8, span[at..]);
        }
        else if (framing == BodyFraming.Chunked)
        {
            at += Copy("transfer-encoding: chunked\r\n"u8, span[at..]);
        }
        at += Copy("\r\n"u8, span[at..]);
        Debug.Assert(at == span.Length, "The request head was measured wrong.");
    }

    /// <summary>
    /// The declared length, or 0 for a bodiless POST, PUT or PATCH: RFC 9110 §8.6, "A user agent SHOULD send
    /// Content-Length in a request when the method defines a meaning for enclosed content and it is not sending
    /// Transfer-Encoding" (some servers answer 411 Length Required otherwise).
    /// </summary>
    private static long? ContentLengthToSend(BackendRequest request) =>
        request.ContentLength ?? (!request.HasBody && request.Method is "POST" or "PUT" or "PATCH" ? 0 : null);

    /// <summary>
    /// Fields we never copy: the connection-specific ones (RFC 9110 §7.6.1: a proxy "MUST remove" Connection and the
    /// fields it lists; Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade and TE are hop-by-hop as well), Host
    /// (written first, from the authority) and Content-Length (written from <see cref="BackendRequest.ContentLength"/>).
    /// NOTE: "TE: trailers" alone goes through, as HttpClient sends it: a gRPC-over-HTTP/1.1 bridge or any backend that
    /// sends trailers only when asked must still see it (YARP #1191 once stripped it).
    /// </summary>
    private static bool IsSkipped(string name, string value) =>
        HttpFieldRules.IsConnectionSpecificInRequestIgnoreCase(name, value)
        || name.Equals("host", StringComparison.OrdinalIgnoreCase)
        || name.Equals("content-length", StringComparison.OrdinalIgnoreCase);

    /// <summary>Host = uri-host [ ":" port ] (RFC 9110 §7.2), checked with the server's own Host rule: no SP, CTL, "@" or "/".</summary>
    private static bool IsValidAuthority(string authority)
    {
        if (!Ascii.IsValid(authority))
        {
            return false;
        }
        Span<byte> bytes = authority.Length <= 256 ? stackalloc byte[authority.Length] : new byte[authority.Length];
        Encoding.ASCII.GetBytes(authority, bytes);
        return Http1RequestTarget.IsValidHost(bytes);
    }

    private static int Copy(ReadOnlySpan<byte> source, Span<byte> destination)
    {
        source.CopyTo(destination);
        return source.Length;
    }

    private static int CountDigits(long value)
    {
        var digits = 1;
        while (value >= 10)
        {
            value /= 10;
            digits++;
        }
        return digits;
    }
}
