using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.Logging;
using Proxy.Server.Features;

namespace Proxy.Server.Internal;

/// <summary>
/// Runs the ASP.NET Core application for each exchange the engines hand over. Stateless per
/// request (state lives in <see cref="RequestFeatures"/>, kept in the exchange's HostState and
/// reset when the engine hands the same exchange again); shared by all connections.
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
        HostedRequestFeatures<TContext> features;
        FeaturesPool? pool = null;
        if (exchange.HostState is HostedRequestFeatures<TContext> previous)
        {
            // The same exchange again: the next request on an HTTP/1.1 connection (the engine reuses its
            // exchange). Reusing the features also lets the host reuse its context and HttpContext.
            previous.ResetForNextRequest();
            features = previous;
        }
        else if (exchange.Protocol == "HTTP/2")
        {
            // A new stream: take the features (and with them the host's context and HttpContext) of one of the
            // connection's finished streams, and give them back when this one is done.
            pool = FeaturesPool.Of(exchange.Connection);
            if (pool.TryTake(out var reused))
            {
                reused.ResetForExchange(exchange);
                features = reused;
            }
            else
            {
                features = new HostedRequestFeatures<TContext>(exchange, options, dateCache);
            }
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
            ServerLog.ApplicationError(logger, exchange.Connection.ConnectionId, features.TraceIdentifier, e);
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
        // NOTE: the same rule as Kestrel's: the app must not use the HttpContext after its request ended; the
        // connection's next stream gets these features.
        pool?.Return(features);
    }

    /// <summary>
    /// Request features of an HTTP/2 connection's finished streams, kept in its <see cref="ConnectionMetadata.HostState"/>
    /// for the next streams: without it every stream allocated its features, HeaderDictionaries, host context and
    /// HttpContext (about 5 KB of the 8 KB a gRPC unary call allocated). Bounded: beyond
    /// <see cref="Capacity"/> finished features are dropped, so a connection keeps at most that many however many
    /// streams it ran at once.
    /// </summary>
    // Shared by the connection's concurrent handlers: a lock guards the stack (held for a push or a pop).
    private sealed class FeaturesPool
    {
        private const int Capacity = 32;
        private readonly Stack<HostedRequestFeatures<TContext>> _items = new();

        public static FeaturesPool Of(ConnectionMetadata connection)
        {
            // Two first streams may race to create it: one pool stays.
            return connection.HostState as FeaturesPool ?? (FeaturesPool)connection.InitializeHostState(new FeaturesPool());
        }

        public bool TryTake(out HostedRequestFeatures<TContext> features)
        {
            lock (_items)
            {
                return _items.TryPop(out features!);
            }
        }

        public void Return(HostedRequestFeatures<TContext> features)
        {
            lock (_items)
            {
                if (_items.Count < Capacity)
                {
                    _items.Push(features);
                }
            }
        }
    }
}
