using System.Text;

namespace Proxy.Codecs.Http1;

/// <summary>Checks and splits request-target forms (RFC 9112 §3.2) and Host values (RFC 9110 §7.2).</summary>
public static class Http1RequestTarget
{
    /// <summary>absolute-URI = scheme ":" hier-part; scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).</summary>
    public static bool IsAbsoluteForm(ReadOnlySpan<byte> target)
    {
        if (target.IsEmpty || !char.IsAsciiLetter((char)target[0]))
        {
            return false;
        }
        for (var i = 1; i < target.Length; i++)
        {
            var c = (char)target[i];
            if (c == ':')
            {
                return i + 1 < target.Length;
            }
            if (!char.IsAsciiLetterOrDigit(c) && c != '+' && c != '-' && c != '.')
            {
                return false;
            }
        }
        return false;
    }

    /// <summary>authority-form = uri-host ":" port (RFC 9112 §3.2.3); the port is required.</summary>
    public static bool IsAuthorityForm(ReadOnlySpan<byte> target)
    {
        var colon = target.LastIndexOf((byte)':');
        if (colon <= 0 || colon == target.Length - 1)
        {
            return false;
        }
        foreach (var b in target[(colon + 1)..])
        {
            if (!char.IsAsciiDigit((char)b))
            {
                return false;
            }
        }
        return IsValidHost(target) && target.IndexOf((byte)'/') < 0 && target.IndexOf((byte)'@') < 0;
    }

    /// <summary>
    /// Host = uri-host [ ":" port ]. Accepts reg-name, IPv4 and bracketed IP literals: unreserved,
    /// pct-encoded, sub-delims, ":" "[" "]". An empty value is allowed (RFC 9112 §3.2 permits an
    /// empty Host when the target has no authority).
    /// </summary>
    public static bool IsValidHost(ReadOnlySpan<byte> host)
    {
        foreach (var b in host)
        {
            var c = (char)b;
            var ok = char.IsAsciiLetterOrDigit(c) || c is '-' or '.' or '_' or '~' or '%' or '!' or '$' or '&' or '\''
                or '(' or ')' or '*' or '+' or ',' or ';' or '=' or ':' or '[' or ']';
            if (!ok)
            {
                return false;
            }
        }
        return true;
    }

    /// <summary>
    /// Checks the authority of an absolute-form target (RFC 9112 §3.2.2) and returns it with the port its scheme
    /// implies (":80", ":443", or empty for other schemes), for <see cref="AuthorityEquals"/>. Throws 400 for
    /// userinfo (RFC 9110 §4.2.4: a recipient "SHOULD parse for userinfo and treat its presence as an error"), for
    /// an http(s) URI without a host (RFC 9110 §4.2.1: "MUST reject it as invalid") and for an invalid host.
    /// </summary>
    public static ReadOnlySpan<byte> CheckAbsoluteAuthority(ReadOnlySpan<byte> target, out ReadOnlySpan<byte> defaultPort)
    {
        SplitAbsolute(target, out var authority, out _);
        var scheme = target[..target.IndexOf((byte)':')];
        defaultPort = Ascii.EqualsIgnoreCase(scheme, "http"u8) ? ":80"u8
            : Ascii.EqualsIgnoreCase(scheme, "https"u8) ? ":443"u8
            : default;
        if (authority.IndexOf((byte)'@') >= 0)
        {
            throw Http1ParseException.BadRequest("Userinfo in the request target");
        }
        if (authority.IsEmpty ? !defaultPort.IsEmpty : !IsValidHost(authority))
        {
            throw Http1ParseException.BadRequest("Invalid host in the request target");
        }
        return authority;
    }

    /// <summary>
    /// Whether a Host value names the same authority as an absolute-form target: ASCII case-insensitive, with the
    /// scheme's default port (<paramref name="defaultPort"/>, ":80" for http) written or left out on either side.
    /// </summary>
    public static bool AuthorityEquals(ReadOnlySpan<byte> host, ReadOnlySpan<byte> authority, ReadOnlySpan<byte> defaultPort)
    {
        return Ascii.EqualsIgnoreCase(WithoutPort(host, defaultPort), WithoutPort(authority, defaultPort));

        static ReadOnlySpan<byte> WithoutPort(ReadOnlySpan<byte> value, ReadOnlySpan<byte> port) =>
            !port.IsEmpty && value.EndsWith(port) ? value[..^port.Length] : value;
    }

    /// <summary>
    /// Splits an absolute-form target into authority and the rest, e.g. "http://a.example:8080/x?y"
    /// -> ("a.example:8080", "/x?y"). The rest can be empty or start with "?" ("http://h?q"); callers
    /// then put "/" in front. RFC 9112 §3.2.2: the server uses this authority, not Host. Userinfo is left in the
    /// authority: the parser rejects it (<see cref="CheckAbsoluteAuthority"/>).
    /// </summary>
    public static void SplitAbsolute(ReadOnlySpan<byte> target, out ReadOnlySpan<byte> authority, out ReadOnlySpan<byte> pathAndQuery)
    {
        var schemeEnd = target.IndexOf((byte)':');
        var rest = target[(schemeEnd + 1)..];
        authority = default;
        if (rest.StartsWith("//"u8))
        {
            rest = rest[2..];
            var end = rest.IndexOfAny((byte)'/', (byte)'?', (byte)'#');
            authority = end < 0 ? rest : rest[..end];
            rest = end < 0 ? default : rest[end..];
        }
        var fragment = rest.IndexOf((byte)'#');
        pathAndQuery = fragment < 0 ? rest : rest[..fragment];
    }
}
