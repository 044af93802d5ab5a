using System.Text;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http2;

/// <summary>
/// Receives decoded fields of one header block and checks the request rules of RFC 9113 §8.1-§8.3 as they
/// arrive. It never throws during decoding: the whole block must still pass through the HPACK decoder to
/// keep the dynamic table in sync (RFC 9113 §4.3), so a violation is recorded in <see cref="MalformedToken"/>
/// and turned into a stream error once decoding ends.
/// </summary>
// Owned by the read loop (one per connection, reset per header block).
internal sealed class RequestHeaderCollector : IHpackHeaderHandler
{
    private readonly int _maxListSize;
    private readonly int _maxCount;
    private readonly string _connectionScheme;
    private readonly bool _allowAlternateSchemes;
    private bool _isTrailers;
    private bool _seenRegular;
    private int _hostIndex; // position of the host field in Fields, or -1

    // The previous request block's strings, reused when the next block repeats the same octets.
    private readonly List<KeyValuePair<string, string>> _previousFields = new();
    private string? _previousAuthority;
    private string? _previousPath;

    /// <param name="maxListSize">Largest decoded header list (RFC 9113 §6.5.2 accounting); beyond it <see cref="TooLarge"/>.</param>
    /// <param name="maxCount">Most fields in one list; beyond it <see cref="TooLarge"/>.</param>
    /// <param name="connectionScheme">"https" on a TLS connection, else "http": the ":scheme" a request must carry.</param>
    /// <param name="allowAlternateSchemes">Accept any syntactically valid ":scheme" (<see cref="Http2Options.AllowAlternateSchemes"/>).</param>
    public RequestHeaderCollector(int maxListSize, int maxCount, string connectionScheme, bool allowAlternateSchemes)
    {
        _maxListSize = maxListSize;
        _maxCount = maxCount;
        _connectionScheme = connectionScheme;
        _allowAlternateSchemes = allowAlternateSchemes;
    }

    public string? Method { get; private set; }
    public string? Scheme { get; private set; }
    public string? Authority { get; private set; }
    public string? Path { get; private set; }
    public string? Host { get; private set; }
    public long? ContentLength { get; private set; }
    public List<KeyValuePair<string, string>> Fields { get; } = new();

    /// <summary>Decoded size with RFC 9113 §6.5.2 accounting (name + value + 32 per field).</summary>
    public long ListSize { get; private set; }
    public int FieldCount { get; private set; }

    /// <summary>First rule broken (a short token for the RST reason), or null.</summary>
    public string? MalformedToken { get; private set; }

    /// <summary>The list exceeded MaxHeaderListSize or MaxHeaderCount: answered with 431, not a protocol error.</summary>
    public bool TooLarge => ListSize > _maxListSize || FieldCount > _maxCount;

    public void Reset(bool isTrailers)
    {
        if (!_isTrailers && Fields.Count > 0)
        {
            // Remember the last request block's fields for GetRegularValue (the strings are immutable).
            _previousFields.Clear();
            _previousFields.AddRange(Fields);
        }
        _isTrailers = isTrailers;
        _seenRegular = false;
        _hostIndex = -1;
        Method = Scheme = Authority = Path = Host = null;
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
            return; // keep counting for the abuse check, stop allocating
        }
        // RFC 9113 §8.2.1: values MUST NOT contain NUL, CR or LF, nor start or end with SP or HTAB.
        if (!IsValidValue(value))
        {
            Malformed("invalid_field_value");
            return;
        }
        if (name.Length > 0 && name[0] == (byte)':')
        {
            OnPseudoHeader(name, value);
            return;
        }
        // RFC 9113 §8.2.1: "A field name MUST NOT contain characters in the ranges 0x00-0x20, 0x41-0x5a, or 0x7f-0xff".
        if (!IsValidName(name))
        {
            Malformed("invalid_field_name");
            return;
        }
        _seenRegular = true;
        var nameString = KnownHeaderStrings.GetName(name);
        var valueString = GetRegularValue(nameString, value);
        // RFC 9113 §8.2.2: connection-specific fields make the message malformed; "te" may only carry "trailers".
        if (HttpFieldRules.IsConnectionSpecific(nameString))
        {
            Malformed("connection_specific_field");
            return;
        }
        if (HttpFieldRules.IsTeOtherThanTrailers(nameString, valueString))
        {
            Malformed("te_not_trailers");
            return;
        }
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
        else if (nameString == "host" && !_isTrailers)
        {
            // RFC 9113 §8.3.1: Host, when present, "MUST NOT be empty"; RFC 9110 §7.2: one Host, no userinfo.
            var token = Host is not null ? "duplicate_host"
                : value.IsEmpty ? "empty_host"
                : value.IndexOf((byte)'@') >= 0 ? "host_userinfo"
                : !Http1RequestTarget.IsValidHost(value) ? "invalid_host"
                : null;
            if (token is not null)
            {
                Malformed(token);
                return;
            }
            Host = valueString;
            _hostIndex = Fields.Count;
        }
        Fields.Add(new(nameString, valueString));
    }

    private void OnPseudoHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        // RFC 9113 §8.1: trailers MUST NOT include pseudo-header fields.
        if (_isTrailers)
        {
            Malformed("pseudo_header_in_trailers");
            return;
        }
        // RFC 9113 §8.3: all pseudo-header fields MUST appear before regular fields.
        if (_seenRegular)
        {
            Malformed("pseudo_header_after_regular");
            return;
        }
        // Matched on the octets: no string is made for the name, and the values are interned or reused.
        if (name.SequenceEqual(":method"u8))
        {
            if (Method is not null || !IsToken(value)) { Malformed("invalid_method"); return; }
            Method = KnownHeaderStrings.GetValue(value);
        }
        else if (name.SequenceEqual(":scheme"u8))
        {
            // RFC 9113 §8.3.1 refers to RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
            if (Scheme is not null || !HttpFieldRules.IsValidScheme(value)) { Malformed("invalid_scheme"); return; }
            Scheme = KnownHeaderStrings.GetValue(value);
        }
        else if (name.SequenceEqual(":authority"u8))
        {
            // RFC 9113 §8.3.1: ":authority MUST NOT include the deprecated userinfo subcomponent for "http" or "https"
            // schemed URIs" (and no other scheme of ours has one); if present it "MUST NOT be empty".
            if (Authority is not null) { Malformed("duplicate_authority"); return; }
            if (value.IndexOf((byte)'@') >= 0) { Malformed("authority_userinfo"); return; }
            if (value.IsEmpty) { Malformed("empty_authority"); return; }
            if (!Http1RequestTarget.IsValidHost(value)) { Malformed("invalid_authority"); return; }
            Authority = _previousAuthority = Reuse(_previousAuthority, value);
        }
        else if (name.SequenceEqual(":path"u8))
        {
            // RFC 9113 §8.3.1: ":path" MUST NOT be empty for http/https; no spaces or controls either.
            if (Path is not null || value.IsEmpty || !IsVisible(value)) { Malformed("invalid_path"); return; }
            Path = _previousPath = Reuse(_previousPath, value);
        }
        else
        {
            // RFC 9113 §8.3: unknown pseudo-headers (and ":status" in a request) make it malformed.
            Malformed("unknown_pseudo_header");
        }
    }

    /// <summary>
    /// A regular field's value: interned when common, else the string the previous request block had
    /// at the same position for the same name when the octets are equal (clients send the same fields
    /// in the same order on every request of a connection), else a new string.
    /// </summary>
    private string GetRegularValue(string name, ReadOnlySpan<byte> value)
    {
        var known = KnownHeaderStrings.FindValue(value);
        if (known is not null)
        {
            return known;
        }
        int position = Fields.Count;
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

    private static string Reuse(string? previous, ReadOnlySpan<byte> value) =>
        previous is not null && KnownHeaderStrings.EqualsLatin1(previous, value) ? previous : Encoding.Latin1.GetString(value);

    /// <summary>Checks the pseudo-header set once the block ended (RFC 9113 §8.3.1, §8.5 for CONNECT).</summary>
    public void ValidateRequestComplete()
    {
        if (MalformedToken is not null || TooLarge)
        {
            return;
        }
        if (Method is null)
        {
            Malformed("missing_method");
        }
        else if (Method == "CONNECT")
        {
            // RFC 9113 §8.5: ":scheme" and ":path" MUST be omitted; ":authority" MUST be present.
            if (Scheme is not null || Path is not null || Authority is null)
            {
                Malformed("invalid_connect");
            }
        }
        else if (Scheme is null || Path is null)
        {
            Malformed("missing_pseudo_header");
        }
        else if (Path[0] != '/' && !(Path == "*" && Method == "OPTIONS"))
        {
            Malformed("invalid_path");
        }
        else if (!string.Equals(Scheme, _connectionScheme, StringComparison.OrdinalIgnoreCase) && !_allowAlternateSchemes)
        {
            // Kestrel's rule: the scheme is the connection's ("https" on TLS, "http" on cleartext) unless alternates are
            // allowed; a client must not make the app believe a cleartext request came over TLS, or the reverse.
            Malformed("scheme_mismatch");
        }
        else if (Authority is null && Host is null && (IsScheme("http") || IsScheme("https")))
        {
            // RFC 9113 §8.3.1: with a scheme that has a mandatory authority (http, https) "the request MUST contain
            // either an :authority pseudo-header field or a Host header field".
            Malformed("missing_authority");
        }
        if (MalformedToken is not null)
        {
            return;
        }
        if (Scheme is not null && IsScheme(_connectionScheme))
        {
            Scheme = _connectionScheme; // "HTTPS" is "https": the app sees the canonical string
        }
        if (Authority is not null && _hostIndex >= 0 && !string.Equals(Fields[_hostIndex].Value, Authority, StringComparison.Ordinal))
        {
            // RFC 9113 §8.3.1: "The recipient of an HTTP/2 request MUST NOT use the Host header field to determine the
            // target URI if ":authority" is present". An app reads Request.Host from the Host field, so the field is
            // replaced by :authority (as Kestrel does): that is the host the app serves and a proxy forwards.
            Host = Authority;
            Fields[_hostIndex] = new(Fields[_hostIndex].Key, Authority);
        }
    }

    private bool IsScheme(string scheme) => string.Equals(Scheme, scheme, StringComparison.OrdinalIgnoreCase);

    private void Malformed(string token) => MalformedToken ??= token;

    private static bool IsValidValue(ReadOnlySpan<byte> value) => HttpFieldRules.IsValidValue(value);

    private static bool IsValidName(ReadOnlySpan<byte> name) => HttpFieldRules.IsValidName(name);

    private static bool IsToken(ReadOnlySpan<byte> value) => HttpFieldRules.IsToken(value);

    private static bool IsVisible(ReadOnlySpan<byte> value) => HttpFieldRules.IsVisible(value);
}
