using System.Globalization;
using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Forwarder;

/// <summary>What the forwarder needs to know about gRPC over HTTP/2 (PROTOCOL-HTTP2.md).</summary>
internal static class GrpcProtocol
{
    public const int StatusDeadlineExceeded = 4;
    public const int StatusUnavailable = 14;
    public const int StatusInternal = 13;

    public static bool IsGrpc(string? contentType) =>
        contentType is not null && contentType.StartsWith("application/grpc", StringComparison.OrdinalIgnoreCase);

    /// <summary>
    /// Parses <c>grpc-timeout</c>: "TimeoutValue TimeoutUnit", at most 8 ASCII digits, unit one of
    /// H M S m u n. Returns null when absent or malformed (then there is no deadline).
    /// </summary>
    public static TimeSpan? ParseTimeout(string? text)
    {
        if (string.IsNullOrEmpty(text) || text.Length < 2 || text.Length > 9)
        {
            return null;
        }

        if (!long.TryParse(text.AsSpan(0, text.Length - 1), NumberStyles.None, CultureInfo.InvariantCulture, out var value))
        {
            return null;
        }

        return text[^1] switch
        {
            'H' => TimeSpan.FromHours(value),
            'M' => TimeSpan.FromMinutes(value),
            'S' => TimeSpan.FromSeconds(value),
            'm' => TimeSpan.FromMilliseconds(value),
            'u' => TimeSpan.FromMicroseconds(value),
            'n' => TimeSpan.FromTicks(value / 100),
            _ => null,
        };
    }

    /// <summary>
    /// Writes a trailers-only gRPC response: HTTP 200, application/grpc, and grpc-status in the only
    /// HEADERS frame, which a gRPC client reads as the call's status.
    /// </summary>
    public static void SetTrailersOnlyResponse(HttpResponse response, int status, string message)
    {
        response.StatusCode = StatusCodes.Status200OK;
        response.ContentType = "application/grpc";
        response.Headers["grpc-status"] = status.ToString(CultureInfo.InvariantCulture);
        response.Headers["grpc-message"] = Uri.EscapeDataString(message);
    }
}
