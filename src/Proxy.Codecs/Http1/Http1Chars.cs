namespace Proxy.Codecs.Http1;

/// <summary>Character classes of RFC 9110 §5.6.2 (token) and §5.5 (field values).</summary>
internal static class Http1Chars
{
    // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    // NOTE: the checks below are vectorized searches (SearchValues), not a loop over the bytes: a request head's longer
    // values (User-Agent, Accept, Cookie) made the byte loops a third of a head's parse (ParseGet 713 ns, session 35).
    private static readonly SearchValues<byte> s_tchar =
        SearchValues.Create("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"u8);

    // What a field value may not hold: the CTLs but HTAB (NUL, CR and LF among them), and DEL.
    private static readonly SearchValues<byte> s_invalidInValue = SearchValues.Create(
        "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0A\x0B\x0C\x0D\x0E\x0F\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1A\x1B\x1C\x1D\x1E\x1F\x7F"u8);

    public static bool IsToken(ReadOnlySpan<byte> span) => !span.IsEmpty && !span.ContainsAnyExcept(s_tchar);

    /// <summary>field-vchar / SP / HTAB: VCHAR, obs-text (0x80-0xFF), SP, HTAB. Rejects NUL, CR, LF, DEL and other CTLs.</summary>
    public static bool IsValidFieldValue(ReadOnlySpan<byte> value) => !value.ContainsAny(s_invalidInValue);

    /// <summary>request-target bytes: visible US-ASCII only (no SP, CTL or non-ASCII; RFC 3986 has no others).</summary>
    public static bool IsValidTarget(ReadOnlySpan<byte> target) => !target.ContainsAnyExceptInRange((byte)0x21, (byte)0x7E);

    public static bool IsOws(byte b) => b == (byte)' ' || b == (byte)'\t';

    public static ReadOnlySpan<byte> TrimOws(ReadOnlySpan<byte> span)
    {
        var start = 0;
        while (start < span.Length && IsOws(span[start]))
        {
            start++;
        }
        var end = span.Length;
        while (end > start && IsOws(span[end - 1]))
        {
            end--;
        }
        return span[start..end];
    }
}
