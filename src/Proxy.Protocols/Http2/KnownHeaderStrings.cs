using System.Text;

namespace Proxy.Protocols.Http2;

/// <summary>
/// Interned strings for well-known field names and common values, looked up from the decoded octets,
/// so a request header block does not allocate a new string for "content-type" or "application/grpc"
/// on every request.
/// </summary>
// Shared by every connection: immutable static tables. Per thread: a small cache of the names LowercaseName lowered.
internal static class KnownHeaderStrings
{
    // The RFC 7541 Appendix A static table names plus what gRPC, browsers and proxies send on most requests.
    private static readonly string[][] s_namesByLength = GroupByLength(
    [
        "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
        "access-control-allow-origin", "age", "allow", "authorization", "cache-control", "content-disposition",
        "content-encoding", "content-language", "content-length", "content-location", "content-range",
        "content-type", "cookie", "date", "etag", "expect", "expires", "from", "host", "if-match",
        "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link",
        "location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh",
        "retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent",
        "vary", "via", "www-authenticate",
        "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "grpc-message-type", "grpc-status",
        "grpc-message", "origin", "pragma", "priority", "traceparent", "tracestate", "x-forwarded-for",
        "x-forwarded-proto", "x-forwarded-host", "x-request-id", "sec-fetch-dest", "sec-fetch-mode",
        "sec-fetch-site", "upgrade-insecure-requests",
    ]);

    private static readonly string[][] s_valuesByLength = GroupByLength(
    [
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT",
        "http", "https", "/", "trailers", "application/grpc", "application/grpc+proto", "application/json",
        "identity", "gzip", "deflate", "identity,gzip,deflate", "gzip, deflate", "gzip, deflate, br",
        "gzip, deflate, br, zstd", "*/*", "no-cache", "0", "1",
    ]);

    /// <summary>The interned name for these octets, or null when the name is not a known one.</summary>
    public static string? FindName(ReadOnlySpan<byte> name) => Find(s_namesByLength, name);

    /// <summary>The interned value for these octets, or null when the value is not a common one.</summary>
    public static string? FindValue(ReadOnlySpan<byte> value) => Find(s_valuesByLength, value);

    /// <summary>The name as a string: interned when known, else a new string (the caller checked it is ASCII).</summary>
    public static string GetName(ReadOnlySpan<byte> name) => FindName(name) ?? Encoding.ASCII.GetString(name);

    /// <summary>The value as a string: interned when common, else a new ISO-8859-1 string.</summary>
    public static string GetValue(ReadOnlySpan<byte> value) => FindValue(value) ?? Encoding.Latin1.GetString(value);

    /// <summary>
    /// The lowercase form of a field name: the name itself when it has no uppercase letter, the interned string when its
    /// lowercase form is a known name ("X-Forwarded-For", which the forwarder adds to every request, allocates nothing),
    /// else a new string.
    /// </summary>
    public static string LowercaseName(string name)
    {
        if (!name.AsSpan().ContainsAnyInRange('A', 'Z'))
        {
            return name;
        }
        // NOTE: the names that need lowering are mostly the same string objects request after request (the forwarder's
        // "X-Forwarded-For" literals, a transform's configured names), so the last few are remembered by reference:
        // lowering them was 0.9% of a proxied gRPC call's CPU samples.
        var from = t_lowerFrom ??= new string?[LowerCacheSize];
        var to = t_lowerTo ??= new string[LowerCacheSize];
        for (var i = 0; i < from.Length; i++)
        {
            if (ReferenceEquals(from[i], name))
            {
                return to[i];
            }
        }
        var lowered = Lower(name);
        var slot = t_lowerNext++ & (LowerCacheSize - 1);
        from[slot] = name;
        to[slot] = lowered;
        return lowered;
    }

    private const int LowerCacheSize = 8;
    [ThreadStatic]
    private static string?[]? t_lowerFrom;
    [ThreadStatic]
    private static string[]? t_lowerTo;
    [ThreadStatic]
    private static int t_lowerNext;

    private static string Lower(string name)
    {
        if (name.Length < s_namesByLength.Length)
        {
            Span<byte> lower = stackalloc byte[name.Length];
            if (Ascii.ToLower(name, lower, out _) == System.Buffers.OperationStatus.Done && FindName(lower) is { } known)
            {
                return known;
            }
        }
        return name.ToLowerInvariant();
    }

    /// <summary>True when <paramref name="text"/> is exactly these octets read as ISO-8859-1.</summary>
    public static bool EqualsLatin1(string text, ReadOnlySpan<byte> octets)
    {
        if (text.Length != octets.Length)
        {
            return false;
        }
        if (Ascii.Equals(octets, text))
        {
            return true;
        }
        // Non-ASCII octets: Latin-1 maps each octet to the char of the same value.
        for (int i = 0; i < octets.Length; i++)
        {
            if (text[i] != octets[i])
            {
                return false;
            }
        }
        return true;
    }

    private static string? Find(string[][] byLength, ReadOnlySpan<byte> octets)
    {
        if (octets.Length >= byLength.Length)
        {
            return null;
        }
        foreach (var candidate in byLength[octets.Length])
        {
            // Cheap first-octet check before the vectorised comparison.
            if (candidate[0] == octets[0] && Ascii.Equals(octets, candidate))
            {
                return candidate;
            }
        }
        return null;
    }

    private static string[][] GroupByLength(string[] strings)
    {
        int maxLength = strings.Max(s => s.Length);
        var groups = new string[maxLength + 1][];
        for (int length = 0; length <= maxLength; length++)
        {
            groups[length] = strings.Where(s => s.Length == length).ToArray();
        }
        return groups;
    }
}
