using System.Collections.Frozen;

namespace Proxy.Forwarding.Transforms;

/// <summary>
/// What one copy step (request headers, response headers, response trailers) takes from its source: everything that may
/// be copied (the default), nothing (<c>*Copy: false</c>), or only the listed names (<c>*Allowed: "a;b"</c>).
/// Hop-by-hop fields never travel, listed or not: they describe one connection (RFC 9110 §7.6.1) and HTTP/2 forbids them
/// (RFC 9113 §8.2.2). NOTE: YARP lets a listed hop-by-hop name through; we keep the stricter rule on purpose.
/// </summary>
// Immutable; shared by all requests of one route.
internal sealed class HeaderCopy
{
    private HeaderCopy(bool enabled, IReadOnlySet<string>? allowed)
    {
        Enabled = enabled;
        Allowed = allowed;
    }

    public static HeaderCopy All { get; } = new(true, null);

    public static HeaderCopy None { get; } = new(false, null);

    /// <summary>Only these names (compared case-insensitively).</summary>
    public static HeaderCopy Only(IEnumerable<string> names) => new(true, names.ToFrozenSet(StringComparer.OrdinalIgnoreCase));

    /// <summary>False: copy nothing.</summary>
    public bool Enabled { get; }

    /// <summary>Null: every name; otherwise only these.</summary>
    public IReadOnlySet<string>? Allowed { get; }

    /// <summary>Splits YARP's list form, <c>"Content-Type;X-Id"</c>.</summary>
    public static string[] ParseList(string text) =>
        text.Split(';', StringSplitOptions.TrimEntries | StringSplitOptions.RemoveEmptyEntries);
}
