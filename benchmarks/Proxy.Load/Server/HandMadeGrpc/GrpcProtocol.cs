using System.Globalization;
using System.Text;

namespace Proxy.Load.Server.HandMadeGrpc;

/// <summary>
/// Wire details of gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md): header names, grpc-timeout and
/// grpc-message encodings.
/// </summary>
public static class GrpcProtocol
{
    public const string ContentType = "application/grpc";
    public const string StatusHeader = "grpc-status";
    public const string MessageHeader = "grpc-message";
    public const string TimeoutHeader = "grpc-timeout";
    public const string EncodingHeader = "grpc-encoding";

    /// <summary>Length-Prefixed-Message header: Compressed-Flag (1 byte) + Message-Length (4 bytes, big endian).</summary>
    public const int MessageHeaderSize = 5;

    /// <summary>True for application/grpc and application/grpc+proto (any parameters ignored).</summary>
    public static bool IsGrpcContentType(string? contentType)
    {
        if (contentType is null || !contentType.StartsWith(ContentType, StringComparison.OrdinalIgnoreCase))
        {
            return false;
        }

        var rest = contentType.AsSpan(ContentType.Length);
        return rest.IsEmpty || rest[0] is '+' or ';';
    }

    /// <summary>
    /// Parses grpc-timeout: "TimeoutValue TimeoutUnit", at most 8 ASCII digits then one of H M S m u n.
    /// Returns false for anything else (the caller then runs without a deadline).
    /// </summary>
    public static bool TryParseTimeout(string? value, out TimeSpan timeout)
    {
        timeout = default;
        if (string.IsNullOrEmpty(value) || value.Length < 2 || value.Length > 9)
        {
            return false;
        }

        var digits = value.AsSpan(0, value.Length - 1);
        foreach (var c in digits)
        {
            if (c is < '0' or > '9')
            {
                return false;
            }
        }

        var amount = long.Parse(digits, NumberStyles.None, CultureInfo.InvariantCulture);
        long? ticks = value[^1] switch
        {
            'H' => amount * TimeSpan.TicksPerHour,
            'M' => amount * TimeSpan.TicksPerMinute,
            'S' => amount * TimeSpan.TicksPerSecond,
            'm' => amount * TimeSpan.TicksPerMillisecond,
            'u' => amount * TimeSpan.TicksPerMicrosecond,
            'n' => amount / 100, // one tick is 100 ns
            _ => null,
        };
        if (ticks is null)
        {
            return false;
        }

        timeout = TimeSpan.FromTicks(ticks.Value);
        return true;
    }

    /// <summary>
    /// grpc-message is percent-encoded UTF-8: bytes outside 0x20..0x7E, and '%' itself, become %XX.
    /// </summary>
    public static string EncodeMessage(string message)
    {
        var bytes = Encoding.UTF8.GetBytes(message);
        var builder = new StringBuilder(bytes.Length);
        foreach (var b in bytes)
        {
            if (b is >= 0x20 and <= 0x7E && b != (byte)'%')
            {
                builder.Append((char)b);
            }
            else
            {
                builder.Append('%').Append(b.ToString("X2", CultureInfo.InvariantCulture));
            }
        }

        return builder.ToString();
    }

    /// <summary>The inverse of <see cref="EncodeMessage"/>; malformed escapes are kept as they are.</summary>
    public static string DecodeMessage(string encoded)
    {
        var bytes = new List<byte>(encoded.Length);
        for (var i = 0; i < encoded.Length; i++)
        {
            if (encoded[i] == '%' && i + 2 < encoded.Length
                && byte.TryParse(encoded.AsSpan(i + 1, 2), NumberStyles.HexNumber, CultureInfo.InvariantCulture, out var b))
            {
                bytes.Add(b);
                i += 2;
            }
            else
            {
                bytes.AddRange(Encoding.UTF8.GetBytes(encoded[i].ToString()));
            }
        }

        return Encoding.UTF8.GetString(bytes.ToArray());
    }
}
