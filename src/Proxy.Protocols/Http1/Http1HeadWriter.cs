using System.Text;

namespace Proxy.Protocols.Http1;

/// <summary>
/// Serialises a response head or a trailer section straight into the transport's output (RFC 9112 §4, §5,
/// §7.1.2): first a pass that validates every field and measures the section, then one span of exactly that
/// size is filled and advanced once. Nothing is written when a field is invalid, so the connection can still
/// answer 500. Names and values are written as Latin-1 (the validation admits nothing beyond it).
/// </summary>
internal static class Http1HeadWriter
{
    private const int StatusLinePrefixLength = 13; // "HTTP/1.1 " + 3 digits + " "

    // Status lines with the default reason phrase, built on first use per code (index: status - 100).
    // A race builds the same bytes twice; either copy is right.
    private static readonly byte[]?[] s_statusLines = new byte[900][];

    // Characters a field value or reason phrase may hold: HTAB, VCHAR, SP and obs-text (RFC 9110 §5.5).
    private static readonly SearchValues<char> s_fieldValueChars = SearchValues.Create(CreateFieldValueChars());

    /// <summary>What the head writer learnt about the app's fields while validating them.</summary>
    public struct FieldScan
    {
        /// <summary>Octets of the fields to copy, framing and persistence fields excluded.</summary>
        public int Length;
        /// <summary>Octets of the app's Content-Length fields (copied unless the response must not have one).</summary>
        public int ContentLengthFieldsLength;
        public string? ContentLength;
        public string? Connection;
    }

    /// <summary>
    /// Validates every field (token names, no CR/LF/NUL/CTL, nothing beyond Latin-1) and measures those that will be
    /// copied; throws <see cref="InvalidOperationException"/> on the first invalid one.
    /// </summary>
    public static FieldScan Scan(HttpHeaderList fields)
    {
        var scan = default(FieldScan);
        foreach (var (name, value) in fields)
        {
            ValidateName(name);
            ValidateText(value);
            switch (Classify(name))
            {
                case FieldKind.ContentLength:
                    scan.ContentLength ??= value;
                    scan.ContentLengthFieldsLength += name.Length + value.Length + 4;
                    break;
                case FieldKind.Connection:
                    scan.Connection ??= value;
                    break;
                case FieldKind.OtherFraming:
                    break;
                default:
                    scan.Length += name.Length + value.Length + 4;
                    break;
            }
        }
        return scan;
    }

    /// <summary>The status line's length: cached bytes for the default reason, else measured (and validated).</summary>
    public static int MeasureStatusLine(int status, string? reason, out byte[]? cached)
    {
        if (reason is null)
        {
            cached = GetStatusLine(status);
            return cached.Length;
        }
        ValidateText(reason);
        cached = null;
        return StatusLinePrefixLength + reason.Length + 2;
    }

    /// <summary>Writes the status line measured by <see cref="MeasureStatusLine"/>; returns the octets written.</summary>
    public static int WriteStatusLine(Span<byte> span, int status, string? reason, byte[]? cached)
    {
        if (cached is not null)
        {
            cached.CopyTo(span);
            return cached.Length;
        }
        "HTTP/1.1 "u8.CopyTo(span);
        WriteStatusDigits(span[9..], status);
        span[12] = (byte)' ';
        var at = StatusLinePrefixLength + Encoding.Latin1.GetBytes(reason, span[StatusLinePrefixLength..]);
        span[at++] = (byte)'\r';
        span[at++] = (byte)'\n';
        return at;
    }

    /// <summary>
    /// Writes the fields <see cref="Scan"/> measured, framing and persistence fields left out, Content-Length
    /// fields too when <paramref name="skipContentLength"/>; returns the octets written.
    /// </summary>
    public static int WriteFields(Span<byte> span, HttpHeaderList fields, bool skipContentLength)
    {
        var at = 0;
        foreach (var (name, value) in fields)
        {
            var kind = Classify(name);
            if (kind is FieldKind.Connection or FieldKind.OtherFraming || (kind == FieldKind.ContentLength && skipContentLength))
            {
                continue;
            }
            at += Encoding.Latin1.GetBytes(name, span[at..]);
            span[at++] = (byte)':';
            span[at++] = (byte)' ';
            at += Encoding.Latin1.GetBytes(value, span[at..]);
            span[at++] = (byte)'\r';
            span[at++] = (byte)'\n';
        }
        return at;
    }

    /// <summary>True when the comma-separated <paramref name="list"/> holds <paramref name="token"/> (ASCII case-insensitive).</summary>
    public static bool HasToken(string? list, string token)
    {
        if (list is null)
        {
            return false;
        }
        var rest = list.AsSpan();
        while (true)
        {
            var comma = rest.IndexOf(',');
            var part = (comma < 0 ? rest : rest[..comma]).Trim();
            if (part.Equals(token, StringComparison.OrdinalIgnoreCase))
            {
                return true;
            }
            if (comma < 0)
            {
                return false;
            }
            rest = rest[(comma + 1)..];
        }
    }

    /// <summary>Response splitting guard: no CR, LF, NUL or other CTLs, nothing beyond Latin-1.</summary>
    public static void ValidateText(string? value)
    {
        if (value is not null && !IsFieldValue(value))
        {
            throw new InvalidOperationException("Invalid character in response header value or reason phrase.");
        }
    }

    /// <summary>field-value characters (RFC 9110 §5.5): HTAB, SP, VCHAR, obs-text; no CR, LF, NUL, other CTLs or DEL.</summary>
    public static bool IsFieldValue(ReadOnlySpan<char> text) => text.IndexOfAnyExcept(s_fieldValueChars) < 0;

    private static void ValidateName(string name)
    {
        if (!HttpFieldRules.IsToken(name))
        {
            throw new InvalidOperationException($"Invalid response header name '{name}'.");
        }
    }

    private enum FieldKind : byte
    {
        Other,
        ContentLength,
        Connection,
        /// <summary>Transfer-Encoding and Keep-Alive: ours to write (RFC 9112 §6, §9.6), never copied.</summary>
        OtherFraming,
    }

    private static FieldKind Classify(string name) => name.Length switch
    {
        14 when name.Equals("Content-Length", StringComparison.OrdinalIgnoreCase) => FieldKind.ContentLength,
        10 when name.Equals("Connection", StringComparison.OrdinalIgnoreCase) => FieldKind.Connection,
        10 when name.Equals("Keep-Alive", StringComparison.OrdinalIgnoreCase) => FieldKind.OtherFraming,
        17 when name.Equals("Transfer-Encoding", StringComparison.OrdinalIgnoreCase) => FieldKind.OtherFraming,
        _ => FieldKind.Other,
    };

    private static byte[] GetStatusLine(int status)
    {
        var index = status - 100;
        var line = s_statusLines[index];
        if (line is null)
        {
            var reason = Http1ReasonPhrases.Get(status);
            line = new byte[StatusLinePrefixLength + reason.Length + 2];
            WriteStatusLine(line, status, reason, cached: null);
            s_statusLines[index] = line;
        }
        return line;
    }

    private static void WriteStatusDigits(Span<byte> span, int status)
    {
        span[0] = (byte)('0' + status / 100);
        span[1] = (byte)('0' + status / 10 % 10);
        span[2] = (byte)('0' + status % 10);
    }

    private static string CreateFieldValueChars()
    {
        var chars = new StringBuilder("\t");
        for (var c = 0x20; c <= 0xFF; c++)
        {
            if (c != 0x7F)
            {
                chars.Append((char)c);
            }
        }
        return chars.ToString();
    }
}
