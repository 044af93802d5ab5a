using System.Text;
using Proxy.Codecs.Hpack;

namespace Proxy.Protocols.Http2.Client;

/// <summary>
/// Receives the decoded fields of one response header block (or trailer block) from a backend and checks the rules of
/// RFC 9113 §8.1-§8.3 for responses. Like the server's request collector it never throws while decoding: the whole
/// block must pass through the HPACK decoder to keep the dynamic table in sync (§4.3); a violation is recorded in
/// <see cref="MalformedToken"/> and becomes a stream error afterwards.
/// </summary>
// Owned by the client connection's read loop (one per connection, reset per header block).
internal sealed class ResponseHeaderCollector : IHpackHeaderHandler
{
    private readonly int _maxListSize;
    private readonly int _maxCount;
    private bool _isTrailers;
    private bool _seenRegular;
    private List<KeyValuePair<string, string>> _previousFields = new();

    public ResponseHeaderCollector(int maxListSize, int maxCount)
    {
        _maxListSize = maxListSize;
        _maxCount = maxCount;
    }

    /// <summary>:status, or -1 when absent.</summary>
    public int Status { get; private set; } = -1;
    public long? ContentLength { get; private set; }
    public List<KeyValuePair<string, string>> Fields { get; private set; } = new();
    public long ListSize { get; private set; }
    public int FieldCount { get; private set; }
    public string? MalformedToken { get; private set; }
    public bool TooLarge => ListSize > _maxListSize || FieldCount > _maxCount;

    public void Reset(bool isTrailers)
    {
        if (!_isTrailers && Fields.Count > 0)
        {
            // The last head's list becomes the previous one and the older list is reused (cleared below): no copy. Only
            // the read loop reads Fields, and only before the next Reset (the stream copies what it keeps).
            (_previousFields, Fields) = (Fields, _previousFields);
        }
        _isTrailers = isTrailers;
        _seenRegular = false;
        Status = -1;
        ContentLength = null;
        Fields.Clear();
        ListSize = 0;
        FieldCount = 0;
        MalformedToken = null;
    }

    public void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        ListSize += name.Length + value.Length + 32;
        FieldCount++;
        if (MalformedToken is not null || TooLarge)
        {
            return;
        }
        // RFC 9113 §8.2.1: values MUST NOT contain NUL, CR or LF, nor start or end with SP or HTAB.
        if (!HttpFieldRules.IsValidValue(value))
        {
            Malformed("invalid_field_value");
            return;
        }
        if (name.Length > 0 && name[0] == (byte)':')
        {
            // RFC 9113 §8.1: trailers MUST NOT include pseudo-headers; §8.3: pseudo-headers come first; §8.3.2:
            // a response has exactly one, :status, of three digits.
            if (_isTrailers || _seenRegular || !name.SequenceEqual(":status"u8) || Status >= 0 || !TryParseStatus(value, out var status))
            {
                Malformed("invalid_pseudo_header");
                return;
            }
            Status = status;
            return;
        }
        if (!HttpFieldRules.IsValidName(name))
        {
            Malformed("invalid_field_name");
            return;
        }
        _seenRegular = true;
        var nameString = KnownHeaderStrings.GetName(name);
        // RFC 9113 §8.2.2: connection-specific fields make the message malformed.
        if (HttpFieldRules.IsConnectionSpecificInResponse(nameString))
        {
            Malformed("connection_specific_field");
            return;
        }
        var valueString = GetValue(nameString, value);
        if (nameString == "content-length" && !_isTrailers)
        {
            if (!long.TryParse(valueString, System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out var length)
                || (ContentLength is { } previous && previous != length))
            {
                Malformed("invalid_content_length");
                return;
            }
            ContentLength = length;
        }
        Fields.Add(new(nameString, valueString));
    }

    /// <summary>After a response block: :status must be present (RFC 9113 §8.3.2).</summary>
    public void ValidateResponseComplete()
    {
        if (!_isTrailers && MalformedToken is null && Status < 0)
        {
            Malformed("missing_status");
        }
    }

    private string GetValue(string name, ReadOnlySpan<byte> value)
    {
        var known = KnownHeaderStrings.FindValue(value);
        if (known is not null)
        {
            return known;
        }
        // Backends answer with the same fields in the same order: reuse the previous response's string when equal.
        var position = Fields.Count;
        if (!_isTrailers && position < _previousFields.Count)
        {
            var previous = _previousFields[position];
            if (ReferenceEquals(previous.Key, name) && KnownHeaderStrings.EqualsLatin1(previous.Value, value))
            {
                return previous.Value;
            }
        }
        return Encoding.Latin1.GetString(value);
    }

    private static bool TryParseStatus(ReadOnlySpan<byte> value, out int status)
    {
        status = 0;
        if (value.Length != 3)
        {
            return false;
        }
        foreach (var b in value)
        {
            if (b is < (byte)'0' or > (byte)'9')
            {
                return false;
            }
            status = status * 10 + (b - '0');
        }
        return status >= 100;
    }

    private void Malformed(string token) => MalformedToken ??= token;
}
