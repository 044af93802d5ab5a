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

    [LoggerMessage(6, LogLevel.Debug, "Client-side outcome {Error} (route '{RouteId}', cluster '{ClusterId}', destination '{DestinationId}'): {Reason}")]
    public static partial void ClientOutcome(ILogger logger, ForwarderError error, string? routeId, string? clusterId, string? destinationId, string reason);

    [LoggerMessage(7, LogLevel.Warning, "Destination '{DestinationId}' in cluster '{ClusterId}' is unhealthy for {Period} (passive health: {Reason})")]
    public static partial void DestinationSatOut(ILogger logger, string clusterId, string destinationId, string reason, TimeSpan period);

    /// <summary>
    /// The one log entry of a forwarded request that did not succeed. What the client caused (it went away or reset, its
    /// upload broke, its request was malformed, its own gRPC deadline passed) is routine for a proxy: Debug, one line, no
    /// stack trace, so an h2spec run or a burst of cancelled calls does not bury real faults. What the backend or the
    /// proxy caused stays a Warning with the exception. The metrics count both (error.type).
    /// </summary>
    public static void Outcome(ILogger logger, ForwarderError error, Microsoft.AspNetCore.Http.HttpContext context, Exception? exception, bool clientDeadlineExpired) =>
        Outcome(logger, error, context.Features.Get<IReverseProxyFeature>(), context.Response.StatusCode, exception, clientDeadlineExpired);

    /// <summary>The same, for a request the forwarder knows by its route and the status it answered with.</summary>
    public static void Outcome(ILogger logger, ForwarderError error, IReverseProxyFeature? proxy, int statusCode, Exception? exception, bool clientDeadlineExpired)
    {
        if (IsClientCaused(error, clientDeadlineExpired))
        {
            if (logger.IsEnabled(LogLevel.Debug))
            {
                var reason = clientDeadlineExpired && error is ForwarderError.RequestTimedOut or ForwarderError.ResponseBodyTimedOut
                    ? "the client's grpc-timeout expired"
                    : exception?.Message ?? "the client went away";
                ClientOutcome(logger, error, proxy?.RouteId, proxy?.ClusterId, proxy?.DestinationId, reason);
            }
        }
        else
        {
            ForwardingFailed(logger, error, proxy?.RouteId, proxy?.ClusterId, proxy?.DestinationId, statusCode, exception);
        }
    }

    /// <summary>
    /// Outcomes the client caused. A timeout is the client's only when the deadline that expired was its own
    /// (<c>grpc-timeout</c>); the route's Timeout and the activity timeout are the proxy's limits on a slow backend.
    /// </summary>
    internal static bool IsClientCaused(ForwarderError error, bool clientDeadlineExpired) => error switch
    {
        ForwarderError.RequestCanceled or ForwarderError.ResponseBodyCanceled => true,
        ForwarderError.RequestBodyClient or ForwarderError.ResponseBodyClient or ForwarderError.RequestMalformed => true,
        ForwarderError.RequestTimedOut or ForwarderError.ResponseBodyTimedOut => clientDeadlineExpired,
        _ => false,
    };

    [LoggerMessage(30, LogLevel.Information, "Cluster '{ClusterId}' uses the HttpClient transport instead of the native relay: it sets {Keys}, which only HttpClient honours")]
    public static partial void ClusterUsesHttpClient(ILogger logger, string clusterId, string keys);

    [LoggerMessage(8, LogLevel.Debug, "Event stream ended because the host is stopping (route '{RouteId}', cluster '{ClusterId}'); the client may reconnect elsewhere.")]
    public static partial void EventStreamEndedForShutdown(ILogger logger, string? routeId, string? clusterId);
}
