using Microsoft.Extensions.Logging;

namespace Proxy.Forwarding.Telemetry;

internal static partial class Log
{
    [LoggerMessage(30, LogLevel.Debug, "Session affinity key of cluster '{ClusterId}' is unreadable or names no available destination; failure policy {FailurePolicy}")]
    public static partial void AffinityFailed(ILogger logger, string clusterId, string failurePolicy);

    [LoggerMessage(31, LogLevel.Warning, "Reverse proxy configuration: {Message}")]
    public static partial void ConfigKeyIgnored(ILogger logger, string message);
}
