using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Telemetry;

/// <summary>Source-generated log messages of the forwarding layer.</summary>
internal static partial class Log
{
    [LoggerMessage(1, LogLevel.Warning, "Forwarding failed: {Error} (route '{RouteId}', cluster '{ClusterId}', destination '{DestinationId}', status {StatusCode})")]
    public static partial void ForwardingFailed(ILogger logger, ForwarderError error, string? routeId, string? clusterId, string? destinationId, int statusCode, Exception? exception);

    [LoggerMessage(2, LogLevel.Information, "Reverse proxy configuration applied: {RouteCount} routes, {ClusterCount} clusters ({ChangedRoutes} routes and {ChangedClusters} clusters rebuilt)")]
    public static partial void ConfigApplied(ILogger logger, int routeCount, int clusterCount, int changedRoutes, int changedClusters);

    [LoggerMessage(3, LogLevel.Error, "Reverse proxy configuration reload rejected; keeping the last good configuration. {Errors}")]
    public static partial void ReloadRejected(ILogger logger, string errors, Exception? exception);

    [LoggerMessage(4, LogLevel.Debug, "Response started; client response will be aborted with {Reason} after {Error}")]
    public static partial void AbortingClient(ILogger logger, string reason, ForwarderError error);

    [LoggerMessage(5, LogLevel.Debug, "Health probe of destination '{DestinationId}' in cluster '{ClusterId}' failed: {Reason}")]
    public static partial void ProbeFailed(ILogger logger, string clusterId, string destinationId, string reason);
}
