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

    [LoggerMessage(6, LogLevel.Debug, "Client went away: {Error} (route '{RouteId}', cluster '{ClusterId}', destination '{DestinationId}')")]
    public static partial void ClientGone(ILogger logger, ForwarderError error, string? routeId, string? clusterId, string? destinationId);

    [LoggerMessage(7, LogLevel.Warning, "Destination '{DestinationId}' in cluster '{ClusterId}' is unhealthy for {Period} (passive health: {Reason})")]
    public static partial void DestinationSatOut(ILogger logger, string clusterId, string destinationId, string reason, TimeSpan period);

    /// <summary>Client disconnects are routine: they go to Debug so they do not drown real backend failures.</summary>
    public static void Outcome(ILogger logger, ForwarderError error, Microsoft.AspNetCore.Http.HttpContext context, Exception? exception)
    {
        var proxy = context.Features.Get<IReverseProxyFeature>();
        if (error is ForwarderError.RequestCanceled or ForwarderError.ResponseBodyCanceled)
        {
            ClientGone(logger, error, proxy?.RouteId, proxy?.ClusterId, proxy?.DestinationId);
        }
        else
        {
            ForwardingFailed(logger, error, proxy?.RouteId, proxy?.ClusterId, proxy?.DestinationId, context.Response.StatusCode, exception);
        }
    }
}
