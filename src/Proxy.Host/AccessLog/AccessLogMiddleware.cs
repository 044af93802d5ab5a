using System.Diagnostics;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Host.AccessLog;

/// <summary>The <c>AccessLog</c> configuration section.</summary>
public sealed class AccessLogOptions
{
    public const string Section = "AccessLog";

    /// <summary>The logger category of the access log (its level and sinks are set like any other category's).</summary>
    public const string Category = "Proxy.AccessLog";

    /// <summary>One structured line per request. Off by default: at high request rates it costs more than the request.</summary>
    public bool Enabled { get; set; }
}

/// <summary>
/// Writes one structured message per request to the <see cref="AccessLogOptions.Category"/> logger when the request
/// is done: method, path (never the query, which may hold tokens), protocol, status, route, cluster, destination,
/// duration, body bytes in and out, and the forwarder's outcome.
/// </summary>
// Shared by all requests; per-request state lives in locals and the request's features.
internal sealed partial class AccessLogMiddleware(RequestDelegate next, ILoggerFactory loggers)
{
    private readonly ILogger _logger = loggers.CreateLogger(AccessLogOptions.Category);

    public async Task InvokeAsync(HttpContext context)
    {
        if (!_logger.IsEnabled(LogLevel.Information))
        {
            await next(context);
            return;
        }

        var start = Stopwatch.GetTimestamp();
        var bytes = CountingBodies.Attach(context);
        try
        {
            await next(context);
        }
        finally
        {
            var proxy = context.Features.Get<IReverseProxyFeature>();
            var outcome = context.Features.Get<IForwarderErrorFeature>()?.Error ?? ForwarderError.None;
            var request = context.Request;
            Request(_logger, request.Method, request.PathBase + request.Path, request.Protocol, context.Response.StatusCode,
                proxy?.RouteId, proxy?.ClusterId, proxy?.DestinationId,
                Math.Round(Stopwatch.GetElapsedTime(start).TotalMilliseconds, 3), bytes.In, bytes.Out, outcome);
        }
    }

    [LoggerMessage(1, LogLevel.Information,
        "{Method} {Path} {Protocol} {StatusCode} route={Route} cluster={Cluster} destination={Destination} duration={DurationMs}ms in={BytesIn} out={BytesOut} outcome={Outcome}")]
    internal static partial void Request(ILogger logger, string method, string path, string protocol, int statusCode,
        string? route, string? cluster, string? destination, double durationMs, long bytesIn, long bytesOut, ForwarderError outcome);
}

/// <summary>The access log of direct-path requests (DirectPath:Enabled): the same line, from what the direct path reports.</summary>
// Shared by all requests; stateless.
internal sealed class DirectAccessLog(ILoggerFactory loggers) : Proxy.Relay.Direct.IDirectRequestObserver
{
    private readonly ILogger _logger = loggers.CreateLogger(AccessLogOptions.Category);

    public void RequestEnded(in Proxy.Relay.Direct.DirectRequestRecord record)
    {
        if (_logger.IsEnabled(LogLevel.Information))
        {
            AccessLogMiddleware.Request(_logger, record.Method, record.Path, record.Protocol, record.StatusCode, record.RouteId, record.ClusterId,
                record.DestinationId, Math.Round(record.Duration.TotalMilliseconds, 3), record.BytesIn, record.BytesOut, record.Outcome);
        }
    }
}
