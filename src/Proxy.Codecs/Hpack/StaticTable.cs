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

    // Name -> lowest index with that name; entries sharing a name are consecutive (e.g. :status 8..14).
    private static readonly Dictionary<string, int> s_firstIndexByName = new(StringComparer.Ordinal);

    static StaticTable()
    {
        for (int i = 0; i < Count; i++)
        {
            s_names[i] = Encoding.Latin1.GetBytes(s_fields[i].Name);
            s_values[i] = Encoding.Latin1.GetBytes(s_fields[i].Value);
            s_firstIndexByName.TryAdd(s_fields[i].Name, i + 1);
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
        if (!s_firstIndexByName.TryGetValue(name, out int first))
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
}
