using System.Globalization;

namespace Proxy.Server.Internal;

// Shared by all requests; lock-free: readers swap in an immutable entry.
/// <summary>The Date header value (RFC 9110 §6.6.1, IMF-fixdate), formatted at most once per second.</summary>
internal sealed class DateHeaderCache(TimeProvider time)
{
    private sealed record Entry(long Second, string Value);

    private Entry? _current;

    public string GetValue()
    {
        var now = time.GetUtcNow();
        var second = now.ToUnixTimeSeconds();
        var entry = _current;
        if (entry is null || entry.Second != second)
        {
            entry = new Entry(second, now.ToString("r", CultureInfo.InvariantCulture));
            _current = entry;
        }
        return entry.Value;
    }
}
