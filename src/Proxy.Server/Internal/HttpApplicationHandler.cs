using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.Logging;
using Proxy.Server.Features;

namespace Proxy.Server.Internal;

/// <summary>
/// Runs the ASP.NET Core application for each exchange the engines hand over. Stateless per
/// request (state lives in <see cref="RequestFeatures"/>, kept in the exchange's HostState and
/// reset when the engine hands the same exchange again: HTTP/1.1 keep-alive, pooled HTTP/2 streams);
/// shared by all connections. NOTE: as with Kestrel, the app must not use the HttpContext after its
/// request ended.
/// </summary>
internal sealed class HttpApplicationHandler<TContext>(
    IHttpApplication<TContext> application,
    ProxyServerOptions options,
    DateHeaderCache dateCache,
    ILogger logger) : IHttpRequestHandler
    where TContext : notnull
{
    public async Task HandleAsync(HttpExchange exchange)
    {
        RequestFeatures features;
        if (exchange.HostState is HostedRequestFeatures<TContext> previous)
        {
            // The same exchange again: the next request on an HTTP/1.1 connection, or a pooled HTTP/2 stream's next
            // life (the engines reuse their exchanges). Reusing the features also lets the host reuse its context
            // and HttpContext.
            previous.ResetForNextRequest();
            features = previous;
        }
        else
        {
            features = new HostedRequestFeatures<TContext>(exchange, options, dateCache);
            exchange.HostState = features;
        }
        var context = application.CreateContext(features.Features);
        Exception? applicationError = null;
        try
        {
            await application.ProcessRequestAsync(context).ConfigureAwait(false);
        }
        catch (Exception e)
        {
            applicationError = e;
            if (IsClientAbort(exchange, e))
            {
                ServerLog.ApplicationStoppedByClientAbort(logger, exchange.Connection.ConnectionId, features.TraceIdentifier, e.GetType().Name, e.Message);
            }
            else
            {
                ServerLog.ApplicationError(logger, exchange.Connection.ConnectionId, features.TraceIdentifier, e);
            }
        }

        try
        {
            if (applicationError is null)
            {
                await features.CompleteResponseAsync().ConfigureAwait(false);
            }
            else
            {
                await features.OnApplicationErrorAsync(applicationError).ConfigureAwait(false);
            }
        }
        catch (Exception e)
        {
            // Completing failed (client gone, OnStarting threw): nothing more can be sent.
            applicationError ??= e;
            ServerLog.ResponseCompletionFailed(logger, exchange.Connection.ConnectionId, e);
            exchange.Abort(RequestFeatures.InternalError);
        }

        var completedError = await features.FireOnCompletedAsync().ConfigureAwait(false);
        if (completedError is not null)
        {
            ServerLog.OnCompletedFailed(logger, exchange.Connection.ConnectionId, completedError);
        }
        application.DisposeContext(context, applicationError);
    }

    /// <summary>
    /// The app failed only because the client went away (reset, disconnect): its body read or write threw, or it honoured
    /// RequestAborted. Routine for a server: Debug without a stack trace, as ASP.NET Core's own middleware does, so it
    /// does not bury real application errors. Anything else the app throws stays an Error.
    /// </summary>
    private static bool IsClientAbort(HttpExchange exchange, Exception e) =>
        exchange.RequestAborted.IsCancellationRequested && e is OperationCanceledException or IOException;
}
