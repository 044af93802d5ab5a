namespace Proxy.Protocols;

/// <summary>
/// The one field policy of the engines, both roles and both directions: which names and values may appear in an
/// HTTP/2 message (RFC 9113 §8.2) and which fields are connection-specific (§8.2.2, RFC 9110 §7.6.1). The request
/// and response collectors, the response writers, the HTTP/1.1 client and the relay all ask here.
/// </summary>
// Stateless.
public static class HttpFieldRules
{
    private static readonly SearchValues<byte> TokenBytes =
        SearchValues.Create("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"u8);

    private static readonly SearchValues<char> TokenChars =
        SearchValues.Create("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");

    /// <summary>
    /// Connection-specific fields (lowercase names): RFC 9113 §8.2.2 "An endpoint MUST NOT generate an HTTP/2 message
    /// containing connection-specific header fields"; a proxy never forwards them either way (RFC 9110 §7.6.1).
    /// </summary>
    public static bool IsConnectionSpecific(string lowerName) =>
        lowerName is "connection" or "keep-alive" or "proxy-connection" or "transfer-encoding" or "upgrade";

    /// <summary>
    /// The same five names in any case, for fields as an app or an HTTP/1.1 message spelled them: no lowercased copy
    /// is made (the length picks the one or two names to compare).
    /// </summary>
    public static bool IsConnectionSpecificIgnoreCase(ReadOnlySpan<char> name) => name.Length switch
    {
        7 => name.Equals("upgrade", StringComparison.OrdinalIgnoreCase),
        10 => name.Equals("connection", StringComparison.OrdinalIgnoreCase) || name.Equals("keep-alive", StringComparison.OrdinalIgnoreCase),
        16 => name.Equals("proxy-connection", StringComparison.OrdinalIgnoreCase),
        17 => name.Equals("transfer-encoding", StringComparison.OrdinalIgnoreCase),
        _ => false,
    };

    /// <summary>
    /// RFC 9113 §8.2.2: TE "MAY be present in an HTTP/2 request; when it is, it MUST NOT contain any value other than
    /// 'trailers'" (lowercase name, exact value).
    /// </summary>
    public static bool IsTeOtherThanTrailers(string lowerName, string value) => lowerName == "te" && value != "trailers";

    /// <summary>
    /// A request field that must not be sent (lowercase name): connection-specific, or TE with anything but "trailers"
    /// (RFC 9113 §8.2.2).
    /// </summary>
    public static bool IsConnectionSpecificInRequest(string lowerName, string value) =>
        IsConnectionSpecific(lowerName) || IsTeOtherThanTrailers(lowerName, value);

    /// <summary>
    /// <see cref="IsConnectionSpecificInRequest"/> in any case, for HTTP/1.1 (RFC 9110 §7.6.1: TE is hop-by-hop;
    /// "TE: trailers" alone still goes through, in any case, as HttpClient sends it).
    /// </summary>
    public static bool IsConnectionSpecificInRequestIgnoreCase(ReadOnlySpan<char> name, ReadOnlySpan<char> value) =>
        IsConnectionSpecificIgnoreCase(name)
        || (name.Equals("te", StringComparison.OrdinalIgnoreCase) && !value.Equals("trailers", StringComparison.OrdinalIgnoreCase));

    /// <summary>
    /// A response field that is connection-specific (lowercase name): TE too, as the RFC 9113 §8.2.2 exception covers
    /// requests only and a response has no use for it.
    /// </summary>
    public static bool IsConnectionSpecificInResponse(string lowerName) => IsConnectionSpecific(lowerName) || lowerName == "te";

    /// <summary>RFC 9110 §5.6.2 token: one or more tchar.</summary>
    public static bool IsToken(ReadOnlySpan<byte> value) => !value.IsEmpty && !value.ContainsAnyExcept(TokenBytes);

    /// <summary>RFC 9110 §5.6.2 token over a string.</summary>
    public static bool IsToken(ReadOnlySpan<char> value) => !value.IsEmpty && !value.ContainsAnyExcept(TokenChars);

    /// <summary>
    /// RFC 9113 §8.2.1: "A field name MUST NOT contain characters in the ranges 0x00-0x20, 0x41-0x5a, or 0x7f-0xff"
    /// (so no uppercase), and a colon only starts a pseudo-header.
    /// </summary>
    public static bool IsValidName(ReadOnlySpan<byte> name) => !name.IsEmpty && !name.ContainsAnyExcept(NameBytes);

    // 0x21-0x7e without uppercase and ':' (the checks below are vectorized: a gRPC request has a dozen fields, each
    // checked on the way in and again before it goes to the backend).
    private static readonly SearchValues<byte> NameBytes =
        SearchValues.Create("!\"#$%&'()*+,-./0123456789;<=>?@[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"u8);

    /// <summary>RFC 9113 §8.2.1: a value MUST NOT contain NUL, CR or LF, nor start or end with SP or HTAB.</summary>
    public static bool IsValidValue(ReadOnlySpan<byte> value)
    {
        if (value.IsEmpty)
        {
            return true;
        }
        if (value[0] is (byte)' ' or (byte)'\t' || value[^1] is (byte)' ' or (byte)'\t')
        {
            return false;
        }
        return value.IndexOfAny((byte)0, (byte)'\r', (byte)'\n') < 0;
    }

    /// <summary>
    /// A value we may send: no NUL, CR or LF (RFC 9113 §8.2.1) and one octet per character (HPACK and HTTP/1.1 carry
    /// octets). Leading or trailing whitespace is tolerated on output (the peer trims it on HTTP/1.1).
    /// </summary>
    public static bool IsSendableValue(ReadOnlySpan<char> value) =>
        !value.ContainsAnyExceptInRange('\0', '\u00FF') && value.IndexOfAny('\0', '\r', '\n') < 0;

    /// <summary>RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (":scheme" octets).</summary>
    public static bool IsValidScheme(ReadOnlySpan<byte> value)
    {
        if (value.IsEmpty || !char.IsAsciiLetter((char)value[0]))
        {
            return false;
        }
        foreach (var b in value[1..])
        {
            if (!char.IsAsciiLetterOrDigit((char)b) && b is not ((byte)'+' or (byte)'-' or (byte)'.'))
            {
                return false;
            }
        }
        return true;
    }

    /// <summary>Visible ASCII only (no SP, CTL or non-ASCII): :authority and :path octets.</summary>
    public static bool IsVisible(ReadOnlySpan<byte> value) => !value.ContainsAnyExceptInRange((byte)0x21, (byte)0x7e);

    /// <summary>Visible ASCII only, over a string.</summary>
    public static bool IsVisible(ReadOnlySpan<char> value) => !value.ContainsAnyExceptInRange('!', '~');
}
