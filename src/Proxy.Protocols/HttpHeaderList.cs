namespace Proxy.Protocols;

/// <summary>
/// An ordered list of header fields as they came off (or go onto) the wire. Names of HTTP/2
/// requests are lowercase; pseudo-headers are not included (they are properties of the exchange).
/// Owned by whoever holds the exchange at the time: the engine before HandleAsync, the app after.
/// </summary>
public sealed class HttpHeaderList : List<KeyValuePair<string, string>>
{
    public void Add(string name, string value) => Add(new KeyValuePair<string, string>(name, value));

    /// <summary>First value of <paramref name="name"/> (ASCII case-insensitive), or null.</summary>
    public string? Get(string name)
    {
        foreach (var (key, value) in this)
        {
            if (string.Equals(key, name, StringComparison.OrdinalIgnoreCase))
            {
                return value;
            }
        }
        return null;
    }
}
