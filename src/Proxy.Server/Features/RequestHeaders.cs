using System.Collections;
using Microsoft.Extensions.Primitives;
using Microsoft.Net.Http.Headers;

namespace Proxy.Server.Features;

// Owned by the app's request flow, like RequestFeatures (not thread-safe, as HeaderDictionary is not).
/// <summary>
/// The request headers as the app sees them (<see cref="IHttpRequestFeature.Headers"/>), read straight from the exchange's
/// decoded field list instead of a dictionary filled for every request. Repeated fields read as one (cookie crumbs
/// joined with "; " per RFC 9113 §8.2.3, others as several values), and an HTTP/2 request's :authority reads as Host
/// when it has no Host field. The first change (set, add, remove, clear) copies the fields into a
/// <see cref="HeaderDictionary"/>, which serves from then on.
/// </summary>
/// <remarks>
/// NOTE: filling a HeaderDictionary per request hashed every field name, and the dictionary with its entries was kept
/// for the request's life (about 250 bytes per SSE stream). A proxy reads a few fields by name and enumerates the rest
/// once; a scan of a dozen fields costs no more than hashing them. Lookups compare names ASCII case-insensitively.
/// </remarks>
internal sealed class RequestHeaders : IHeaderDictionary
{
    private IReadOnlyList<KeyValuePair<string, string>> _fields = [];
    private string _authority = "";
    private HeaderDictionary? _copy;
    private bool _changed;
    // Whether a name occurs twice, found on first need (one pass over the pairs): most requests repeat none, and then
    // every field is its own header.
    private bool? _repeats;
    private bool? _hostFromAuthority;

    /// <summary>Serves <paramref name="exchange"/>'s fields from now on; changes made for an earlier request are dropped.</summary>
    public void Reset(HttpExchange exchange)
    {
        _fields = exchange.RequestHeaders;
        _authority = exchange.Authority;
        _changed = false;
        _repeats = null;
        _hostFromAuthority = null;
        _copy?.Clear();
        if (_fields.Count > MaxScannedFields)
        {
            // NOTE: lookups scan and repeats are found pair by pair, so a long list would cost its square per request
            // (a client may send hundreds of fields): past this many, the dictionary serves from the start.
            Changed();
        }
    }

    /// <summary>Longest field list served by scanning; a longer one is put in a dictionary at once.</summary>
    internal const int MaxScannedFields = 32;

    // Whether :authority stands in for a missing Host field, found on first need.
    private bool HostFromAuthority => _hostFromAuthority ??= _authority.Length > 0 && IndexOf(HeaderNames.Host) < 0;

    public StringValues this[string key]
    {
        get => TryGetValue(key, out var value) ? value : StringValues.Empty;
        set => Changed()[key] = value;
    }

    public long? ContentLength
    {
        get
        {
            if (_changed)
            {
                return _copy!.ContentLength;
            }
            // As HeaderDictionary reads it: one value, a non-negative integer once trimmed; anything else is no length.
            var value = this[HeaderNames.ContentLength];
            return value.Count == 1 && !string.IsNullOrEmpty(value[0])
                && HeaderUtilities.TryParseNonNegativeInt64(new StringSegment(value[0]).Trim(), out var length) ? length : null;
        }
        set => Changed().ContentLength = value;
    }

    public int Count
    {
        get
        {
            if (_changed)
            {
                return _copy!.Count;
            }
            var count = _fields.Count;
            if (Repeats)
            {
                count = 0;
                for (var i = 0; i < _fields.Count; i++)
                {
                    if (IsFirst(i))
                    {
                        count++;
                    }
                }
            }
            return HostFromAuthority ? count + 1 : count;
        }
    }

    public bool IsReadOnly => false;

    // The collections are the copy's, which the app may hold: the copy serves from then on.
    public ICollection<string> Keys => Changed().Keys;

    public ICollection<StringValues> Values => Changed().Values;

    public bool ContainsKey(string key) => _changed ? _copy!.ContainsKey(key) : IndexOf(key) >= 0 || IsHostFromAuthority(key);

    public bool TryGetValue(string key, out StringValues value)
    {
        if (_changed)
        {
            return _copy!.TryGetValue(key, out value);
        }
        var first = IndexOf(key);
        if (first >= 0)
        {
            value = Combined(first);
            return true;
        }
        if (IsHostFromAuthority(key))
        {
            value = _authority;
            return true;
        }
        value = default;
        return false;
    }

    public bool Contains(KeyValuePair<string, StringValues> item) => TryGetValue(item.Key, out var value) && value.Equals(item.Value);

    public void Add(string key, StringValues value) => Changed().Add(key, value);

    public void Add(KeyValuePair<string, StringValues> item) => Changed().Add(item);

    public bool Remove(string key) => Changed().Remove(key);

    public bool Remove(KeyValuePair<string, StringValues> item) => Changed().Remove(item);

    public void Clear() => Changed().Clear();

    public void CopyTo(KeyValuePair<string, StringValues>[] array, int arrayIndex)
    {
        ArgumentNullException.ThrowIfNull(array);
        foreach (var pair in this)
        {
            array[arrayIndex++] = pair;
        }
    }

    public IEnumerator<KeyValuePair<string, StringValues>> GetEnumerator() => _changed ? _copy!.GetEnumerator() : Enumerate();

    IEnumerator IEnumerable.GetEnumerator() => GetEnumerator();

    private IEnumerator<KeyValuePair<string, StringValues>> Enumerate()
    {
        var fields = _fields;
        for (var i = 0; i < fields.Count; i++)
        {
            if (IsFirst(i))
            {
                yield return new(fields[i].Key, Combined(i));
            }
        }
        if (HostFromAuthority)
        {
            yield return new(HeaderNames.Host, _authority);
        }
    }

    private int IndexOf(string name)
    {
        var fields = _fields;
        for (var i = 0; i < fields.Count; i++)
        {
            // The length first, inline: most names differ in it.
            var key = fields[i].Key;
            if (key.Length == name.Length && string.Equals(key, name, StringComparison.OrdinalIgnoreCase))
            {
                return i;
            }
        }
        return -1;
    }

    private bool IsHostFromAuthority(string key) => string.Equals(key, HeaderNames.Host, StringComparison.OrdinalIgnoreCase) && HostFromAuthority;

    private bool Repeats => _repeats ??= FindRepeats(_fields);

    private static bool FindRepeats(IReadOnlyList<KeyValuePair<string, string>> fields)
    {
        for (var i = 1; i < fields.Count; i++)
        {
            if (HasEarlier(fields, i))
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>No earlier field has the name of field <paramref name="index"/>.</summary>
    private bool IsFirst(int index) => !Repeats || !HasEarlier(_fields, index);

    private static bool HasEarlier(IReadOnlyList<KeyValuePair<string, string>> fields, int index)
    {
        var name = fields[index].Key;
        for (var j = 0; j < index; j++)
        {
            if (string.Equals(fields[j].Key, name, StringComparison.OrdinalIgnoreCase))
            {
                return true;
            }
        }
        return false;
    }

    /// <summary>The value of the field at <paramref name="first"/> joined with every later field of the same name.</summary>
    private StringValues Combined(int first)
    {
        var fields = _fields;
        if (!Repeats)
        {
            return fields[first].Value;
        }
        var name = fields[first].Key;
        StringValues value = fields[first].Value;
        for (var i = first + 1; i < fields.Count; i++)
        {
            if (string.Equals(fields[i].Key, name, StringComparison.OrdinalIgnoreCase))
            {
                value = Append(name, value, fields[i].Value);
            }
        }
        return value;
    }

    /// <summary>A repeated field added to the value so far: cookie crumbs joined with "; " into one (RFC 9113 §8.2.3), others as one more value.</summary>
    private static StringValues Append(string name, StringValues existing, string value)
        => string.Equals(name, HeaderNames.Cookie, StringComparison.OrdinalIgnoreCase)
            ? new StringValues(existing + "; " + value)
            : StringValues.Concat(existing, value);

    /// <summary>The dictionary that serves once the headers change (filled from the fields on the first change).</summary>
    private HeaderDictionary Changed()
    {
        if (_changed)
        {
            return _copy!;
        }
        var copy = _copy ??= new HeaderDictionary();
        copy.Clear();
        foreach (var (name, value) in _fields)
        {
            copy[name] = copy.TryGetValue(name, out var existing) ? Append(name, existing, value) : value;
        }
        if (_authority.Length > 0 && !copy.ContainsKey(HeaderNames.Host))
        {
            copy[HeaderNames.Host] = _authority;
        }
        _changed = true;
        return copy;
    }
}
