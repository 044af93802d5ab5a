using System.Text;

namespace Proxy.Server.Features;

/// <summary>Splits a request target into the decoded path and the raw query, as ASP.NET Core expects them.</summary>
internal static class RequestTarget
{
    /// <summary>
    /// origin-form "/a%20b/../c?x=1" => ("/c"... decoded, "?x=1"); absolute-form (RFC 9112 §3.2.2)
    /// keeps only its path and query; "*" (asterisk-form) gives an empty path.
    /// </summary>
    public static (string Path, string Query) Split(string rawTarget)
    {
        if (rawTarget.Length == 0 || rawTarget == "*")
        {
            return ("", "");
        }

        var target = rawTarget.AsSpan();
        if (target[0] != '/')
        {
            // absolute-form: skip "scheme://authority".
            var schemeEnd = target.IndexOf("://");
            if (schemeEnd >= 0)
            {
                var rest = target[(schemeEnd + 3)..];
                var pathStart = rest.IndexOfAny('/', '?');
                target = pathStart < 0 ? "/" : rest[pathStart..];
            }
        }

        var queryStart = target.IndexOf('?');
        var rawPath = queryStart < 0 ? target : target[..queryStart];
        var query = queryStart < 0 ? "" : target[queryStart..].ToString();
        if (rawPath.IsEmpty)
        {
            rawPath = "/";
        }
        // NOTE: an origin-form target without query or escapes is its own path: no copy of it per request.
        var path = rawPath.Length == rawTarget.Length && rawPath.IndexOf('%') < 0 ? rawTarget : Decode(rawPath);
        return (RemoveDotSegments(path), query);
    }

    /// <summary>
    /// Percent-decodes as UTF-8, except "%2F": a decoded "/" would change the path's segments
    /// (Kestrel keeps it encoded for the same reason). Malformed escapes stay as they are.
    /// </summary>
    internal static string Decode(ReadOnlySpan<char> path)
    {
        if (path.IndexOf('%') < 0)
        {
            return path.ToString();
        }
        var bytes = new List<byte>(path.Length);
        Span<byte> utf8 = stackalloc byte[8];
        for (var i = 0; i < path.Length; i++)
        {
            var c = path[i];
            if (c == '%' && i + 2 < path.Length && IsHex(path[i + 1]) && IsHex(path[i + 2]))
            {
                var b = (byte)((HexValue(path[i + 1]) << 4) | HexValue(path[i + 2]));
                if (b == (byte)'/')
                {
                    bytes.AddRange("%2F"u8);
                }
                else
                {
                    bytes.Add(b);
                }
                i += 2;
            }
            else if (c < 0x80)
            {
                bytes.Add((byte)c);
            }
            else
            {
                // Non-ASCII in the target (not valid per RFC 3986, but seen): keep it as UTF-8, surrogate pairs whole.
                var width = char.IsHighSurrogate(c) && i + 1 < path.Length && char.IsLowSurrogate(path[i + 1]) ? 2 : 1;
                var n = Encoding.UTF8.GetBytes(path.Slice(i, width), utf8);
                bytes.AddRange(utf8[..n]);
                i += width - 1;
            }
        }
        try
        {
            return new UTF8Encoding(false, throwOnInvalidBytes: true).GetString([.. bytes]);
        }
        catch (DecoderFallbackException)
        {
            return path.ToString(); // Not UTF-8: leave it encoded rather than inventing characters.
        }
    }

    /// <summary>RFC 3986 §5.2.4: "/a/./b/../c" => "/a/c", so routing cannot be escaped with dot segments.</summary>
    internal static string RemoveDotSegments(string path)
    {
        if (!path.Contains("/.", StringComparison.Ordinal))
        {
            return path;
        }
        var segments = path.Split('/');
        var output = new List<string>(segments.Length);
        for (var i = 1; i < segments.Length; i++)
        {
            var segment = segments[i];
            var last = i == segments.Length - 1;
            if (segment == ".")
            {
                if (last)
                {
                    output.Add("");
                }
            }
            else if (segment == "..")
            {
                if (output.Count > 0)
                {
                    output.RemoveAt(output.Count - 1);
                }
                if (last)
                {
                    output.Add("");
                }
            }
            else
            {
                output.Add(segment);
            }
        }
        return "/" + string.Join('/', output);
    }

    private static bool IsHex(char c) => char.IsAsciiHexDigit(c);

    private static int HexValue(char c) => c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}
