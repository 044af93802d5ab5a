namespace Proxy.Codecs.Http1;

/// <summary>Character classes of RFC 9110 §5.6.2 (token) and §5.5 (field values).</summary>
internal static class Http1Chars
{
    // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    private static readonly bool[] s_tchar = BuildTchar();

    private static bool[] BuildTchar()
    {
        var table = new bool[256];
        foreach (var c in "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        {
            table[c] = true;
        }
        return table;
    }

    public static bool IsTchar(byte b) => s_tchar[b];

    public static bool IsToken(ReadOnlySpan<byte> span)
    {
        if (span.IsEmpty)
        {
            return false;
        }
        foreach (var b in span)
        {
            if (!s_tchar[b])
            {
                return false;
            }
        }
        return true;
    }

    /// <summary>field-vchar / SP / HTAB: VCHAR, obs-text (0x80-0xFF), SP, HTAB. Rejects NUL, CR, LF, DEL and other CTLs.</summary>
    public static bool IsValidFieldValue(ReadOnlySpan<byte> value)
    {
        foreach (var b in value)
        {
            if ((b < 0x20 && b != (byte)'\t') || b == 0x7F)
            {
                return false;
            }
        }
        return true;
    }

    /// <summary>request-target bytes: visible US-ASCII only (no SP, CTL or non-ASCII; RFC 3986 has no others).</summary>
    public static bool IsValidTarget(ReadOnlySpan<byte> target)
    {
        foreach (var b in target)
        {
            if (b <= 0x20 || b >= 0x7F)
            {
                return false;
            }
        }
        return true;
    }

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
