using System.Text;

namespace Proxy.Codecs.Hpack;

/// <summary>The HPACK static table (RFC 7541 Appendix A): 61 entries, 1-based.</summary>
internal static class StaticTable
{
    public const int Count = 61;

    private static readonly (string Name, string Value)[] s_fields =
    [
        (":authority", ""),
        (":method", "GET"),
        (":method", "POST"),
        (":path", "/"),
        (":path", "/index.html"),
        (":scheme", "http"),
        (":scheme", "https"),
        (":status", "200"),
        (":status", "204"),
        (":status", "206"),
        (":status", "304"),
        (":status", "400"),
        (":status", "404"),
        (":status", "500"),
        ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"),
        ("accept-language", ""),
        ("accept-ranges", ""),
        ("accept", ""),
        ("access-control-allow-origin", ""),
        ("age", ""),
        ("allow", ""),
        ("authorization", ""),
        ("cache-control", ""),
        ("content-disposition", ""),
        ("content-encoding", ""),
        ("content-language", ""),
        ("content-length", ""),
        ("content-location", ""),
        ("content-range", ""),
        ("content-type", ""),
        ("cookie", ""),
        ("date", ""),
        ("etag", ""),
        ("expect", ""),
        ("expires", ""),
        ("from", ""),
        ("host", ""),
        ("if-match", ""),
        ("if-modified-since", ""),
        ("if-none-match", ""),
        ("if-range", ""),
        ("if-unmodified-since", ""),
        ("last-modified", ""),
        ("link", ""),
        ("location", ""),
        ("max-forwards", ""),
        ("proxy-authenticate", ""),
        ("proxy-authorization", ""),
        ("range", ""),
        ("referer", ""),
        ("refresh", ""),
        ("retry-after", ""),
        ("server", ""),
        ("set-cookie", ""),
        ("strict-transport-security", ""),
        ("transfer-encoding", ""),
        ("user-agent", ""),
        ("vary", ""),
        ("via", ""),
        ("www-authenticate", ""),
    ];

    // Byte forms for the decoder, so an indexed field hands the handler spans without copying.
    private static readonly byte[][] s_names = new byte[Count][];
    private static readonly byte[][] s_values = new byte[Count][];

    static StaticTable()
    {
        for (int i = 0; i < Count; i++)
        {
            s_names[i] = Encoding.Latin1.GetBytes(s_fields[i].Name);
            s_values[i] = Encoding.Latin1.GetBytes(s_fields[i].Value);
        }
    }

    public static ReadOnlySpan<byte> Name(int index) => s_names[index - 1];

    public static ReadOnlySpan<byte> Value(int index) => s_values[index - 1];

    public static string NameString(int index) => s_fields[index - 1].Name;

    public static string ValueString(int index) => s_fields[index - 1].Value;

    /// <summary>Finds a static entry for the field: returns the index and whether the value matched too (0 if no name match).</summary>
    public static int Find(string name, string value, out bool valueMatched)
    {
        valueMatched = false;
        int first = FirstIndexOf(name);
        if (first == 0)
        {
            return 0;
        }

        for (int i = first; i <= Count && string.Equals(s_fields[i - 1].Name, name, StringComparison.Ordinal); i++)
        {
            if (string.Equals(s_fields[i - 1].Value, value, StringComparison.Ordinal))
            {
                valueMatched = true;
                return i;
            }
        }

        return first;
    }

    /// <summary>Lowest static index with this name, or 0; entries sharing a name are consecutive (e.g. :status 8..14).</summary>
    /// <remarks>A switch, not a dictionary: the compiler dispatches on length and a few characters, with no hashing.</remarks>
    private static int FirstIndexOf(string name) => name switch
    {
        ":authority" => 1,
        ":method" => 2,
        ":path" => 4,
        ":scheme" => 6,
        ":status" => 8,
        "accept-charset" => 15,
        "accept-encoding" => 16,
        "accept-language" => 17,
        "accept-ranges" => 18,
        "accept" => 19,
        "access-control-allow-origin" => 20,
        "age" => 21,
        "allow" => 22,
        "authorization" => 23,
        "cache-control" => 24,
        "content-disposition" => 25,
        "content-encoding" => 26,
        "content-language" => 27,
        "content-length" => 28,
        "content-location" => 29,
        "content-range" => 30,
        "content-type" => 31,
        "cookie" => 32,
        "date" => 33,
        "etag" => 34,
        "expect" => 35,
        "expires" => 36,
        "from" => 37,
        "host" => 38,
        "if-match" => 39,
        "if-modified-since" => 40,
        "if-none-match" => 41,
        "if-range" => 42,
        "if-unmodified-since" => 43,
        "last-modified" => 44,
        "link" => 45,
        "location" => 46,
        "max-forwards" => 47,
        "proxy-authenticate" => 48,
        "proxy-authorization" => 49,
        "range" => 50,
        "referer" => 51,
        "refresh" => 52,
        "retry-after" => 53,
        "server" => 54,
        "set-cookie" => 55,
        "strict-transport-security" => 56,
        "transfer-encoding" => 57,
        "user-agent" => 58,
        "vary" => 59,
        "via" => 60,
        "www-authenticate" => 61,
        _ => 0,
    };
}
