using System.Diagnostics;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;
using Proxy.Forwarding;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Routing;
using Proxy.Forwarding.Telemetry;
using Proxy.Protocols;
using Proxy.Server;
using Proxy.Server.Features;
using Proxy.Server.Internal;

namespace Proxy.Relay.Direct;

/// <summary>
/// The direct path: a request whose route needs nothing from the ASP.NET Core pipeline is forwarded from the server's
/// exchange to a backend exchange, with no HttpContext, no hosting layer and no endpoint routing in between. It runs the
/// forwarder's own steps (destination choice, admission, transforms, the relay, outcomes, metrics, passive health) through
/// <see cref="ExchangeFront"/>, so a request gets the same answer either way. Everything else goes to the app.
/// </summary>
/// <remarks>
/// NOTE: opt-in for an app (<see cref="NativeRelayExtensions.AddDirectPath(IServiceCollection)"/>): middleware the app adds
/// with <c>app.Use</c> does not see direct requests, and the table below cannot know it is there. The standalone proxy,
/// whose pipeline is its own, turns it on by default on our server (<c>DirectPath:Enabled</c>). Policies a route names
/// (authorization, CORS, rate limiting, timeouts) and endpoint conventions do keep their routes on the pipeline.
/// </remarks>
// Shared by all connections; the route table is immutable and swapped whole when the endpoints change.
internal sealed class DirectPathHandler : IDirectRequestHandler
{
    private readonly IServiceProvider _services;
    private readonly ILogger _logger;
    private readonly DateHeaderCache _dateCache;
    private readonly long? _maxRequestBodySize;
    private readonly bool _addServerHeader;
    private readonly Lock _lock = new();
    private ProxyStateManager? _manager;
    private ProxyEndpointHandler? _endpointHandler;
    private EndpointDataSource? _endpoints;
    private IDirectRequestObserver? _observer;
    private ServerRequestDuration? _duration;
    private bool _ownForwarder;
    private volatile DirectRouteTable? _table;

    public DirectPathHandler(IServiceProvider services, IOptions<ProxyServerOptions> serverOptions, ILoggerFactory loggers, TimeProvider time)
    {
        _services = services;
        _logger = loggers.CreateLogger("Proxy.Relay.Direct");
        _dateCache = new DateHeaderCache(time);
        _maxRequestBodySize = serverOptions.Value.MaxRequestBodySize;
        _addServerHeader = serverOptions.Value.AddServerHeader;
        // The first table is built as the app starts (its endpoints are mapped by then), off any event loop, so the first
        // requests find it (see CurrentTable).
        services.GetService<Microsoft.Extensions.Hosting.IHostApplicationLifetime>()?.ApplicationStarted.Register(
            static state => ((DirectPathHandler)state!).RebuildQuietly(), this);
    }

    public Task? TryHandle(HttpExchange exchange)
    {
        // Only origin-form requests with nothing that turns the exchange into something else (CONNECT, upgrades); not CORS
        // preflights (endpoint routing matches them against the method they ask about, for routes with a CORS policy, and
        // the CORS middleware answers them); not IDN hosts (ASP.NET Core matches hosts on their Unicode form).
        if (exchange.RawTarget is not ['/', ..] || exchange.Method == "CONNECT" || exchange.RequestHeaders.Get("upgrade") is not null
            || (exchange.Method == "OPTIONS" && exchange.RequestHeaders.Get("access-control-request-method") is not null)
            || exchange.Authority.Contains("xn--", StringComparison.OrdinalIgnoreCase))
        {
            return null;
        }

        DirectRequest request;
        DirectRoute? direct;
        ClusterState? cluster;
        try
        {
            if (CurrentTable() is not { } table)
            {
                return null;
            }

            var (path, query) = RequestTarget.Split(exchange.RawTarget);
            direct = table.Match(exchange.Method, exchange.Authority, path);
            if (direct is null || !_manager!.Current.Clusters.TryGetValue(direct.Route.Config.ClusterId!, out cluster) || !CanGoDirect(cluster))
            {
                return null;
            }

            request = new DirectRequest(exchange, new ReverseProxyFeature(direct.Route.RouteId, cluster.ClusterId), path, query, _maxRequestBodySize,
                _dateCache, _addServerHeader, _logger);
        }
        catch (Exception ex)
        {
            // Deciding must never cost the request: the pipeline gets it, as it would without the direct path.
            DirectLog.DecisionFailed(_logger, ex);
            return null;
        }

        if (_duration is { Enabled: true } duration)
        {
            // The server's request metric: recorded when the front ends the response (DirectRequest.EndAsync).
            request.Duration = duration;
            request.HttpRoute = direct.HttpRoute;
            request.Started = Stopwatch.GetTimestamp();
        }

        // One async frame per request unless an observer wants the request timed and counted.
        return _observer is null ? ForwardCoreAsync(request, direct.Route, cluster) : ForwardObservedAsync(request, direct.Route, cluster, _observer);
    }

    /// <summary>What the route's cluster needs from the pipeline: session affinity reads cookies or headers through the HttpContext, a custom load balancer may, and HttpClient is the pipeline's transport.</summary>
    private bool CanGoDirect(ClusterState cluster) =>
        _ownForwarder && cluster.NativeTransport is not null && cluster.Affinity is null
        && cluster.LoadBalancer.GetType().Assembly == typeof(ClusterState).Assembly;

    private async Task ForwardObservedAsync(DirectRequest request, RouteState route, ClusterState cluster, IDirectRequestObserver observer)
    {
        var exchange = request.Exchange;
        var started = Stopwatch.GetTimestamp();
        var counts = request.Counts = new BodyByteCounts();
        try
        {
            await ForwardCoreAsync(request, route, cluster).ConfigureAwait(false);
        }
        finally
        {
            // NOTE: the exchange is still ours here: the engine reuses it only once this handler's task completed.
            var feature = request.Feature;
            try
            {
                observer.RequestEnded(new DirectRequestRecord(exchange.Method, request.Path.Value ?? "/", exchange.Protocol, exchange.StatusCode,
                    feature.RouteId, feature.ClusterId, feature.DestinationId, Stopwatch.GetElapsedTime(started), counts.In, counts.Out, request.Error));
            }
            catch (Exception ex)
            {
                DirectLog.ObserverFailed(_logger, ex);
            }
        }
    }

    // NOTE: the endpoint handler's task itself, with no frame of ours around it: the front ends the response when forwarding
    // is over (ExchangeFront.EndAsync), inside that task. A wrapper here was a state-machine box and one more continuation
    // per request.
    private Task ForwardCoreAsync(DirectRequest request, RouteState route, ClusterState cluster) =>
        _endpointHandler!.ForwardAsync(new ExchangeFront(request), request.Feature, route, cluster);

    /// <summary>
    /// What the app applies to every endpoint that names nothing itself: those routes keep the pipeline, unless they opt out
    /// of it (AllowAnonymous, DisableRateLimiting, DisableRequestTimeout).
    /// </summary>
    private AppWidePolicies AppWidePolicies() => new(
        Authorization: _services.GetService<IOptions<Microsoft.AspNetCore.Authorization.AuthorizationOptions>>()?.Value.FallbackPolicy is not null,
        RateLimiting: _services.GetService<IOptions<Microsoft.AspNetCore.RateLimiting.RateLimiterOptions>>()?.Value.GlobalLimiter is not null,
        RequestTimeout: _services.GetService<IOptions<Microsoft.AspNetCore.Http.Timeouts.RequestTimeoutOptions>>()?.Value.DefaultPolicy is not null);

    /// <summary>
    /// The table for the app's current endpoints (built as the app starts, rebuilt when they change); null until the app
    /// mapped its endpoints, and null on an event loop while the table is out of date: reading the endpoints may build
    /// them (endpoint data sources are lazy), and building the table takes a lock, resolves options and logs, none of
    /// which belongs on a thread every connection of it waits for. The rebuild then runs on the thread pool, and the
    /// request goes to the pipeline, which answers it the same way.
    /// </summary>
    private DirectRouteTable? CurrentTable()
    {
        var table = _table;
        if (table is not null && !_stale || _noForwarding)
        {
            return table;
        }

        if (Proxy.Transport.Sockets.EventLoop.IsCurrentThread)
        {
            QueueRebuild();
            return null;
        }

        return Rebuild();
    }

    // Set when the app's endpoints changed (their change token), cleared just before a table is built from them.
    private volatile bool _stale = true;
    private volatile bool _noForwarding;
    private int _rebuildQueued;

    private void QueueRebuild()
    {
        if (Interlocked.Exchange(ref _rebuildQueued, 1) == 0)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static handler =>
            {
                handler.RebuildQuietly();
                Volatile.Write(ref handler._rebuildQueued, 0);
            }, this, preferLocal: false);
        }
    }

    private void RebuildQuietly()
    {
        try
        {
            Rebuild();
        }
        catch (Exception ex)
        {
            DirectLog.TableFailed(_logger, ex);
        }
    }

    private DirectRouteTable? Rebuild()
    {
        lock (_lock)
        {
            if (_endpoints is null)
            {
                _manager = _services.GetService<ProxyStateManager>();
                _endpointHandler = _services.GetService<ProxyEndpointHandler>();
                if (_manager is null || _endpointHandler is null)
                {
                    _noForwarding = true;
                    return null; // the forwarding layer is not registered: nothing to take, ever
                }

                _ownForwarder = _services.GetService<IHttpForwarder>() is HttpForwarder;
                _observer = _services.GetService<IDirectRequestObserver>();
                _duration = ServerRequestDuration.Find(_services);
                _endpoints = _services.GetRequiredService<EndpointDataSource>();
                // NOTE: a change marks the table stale and starts its rebuild on the pool at once, so the window in which
                // requests on an event loop go to the pipeline is the rebuild's.
                Microsoft.Extensions.Primitives.ChangeToken.OnChange(_endpoints.GetChangeToken, static handler =>
                {
                    handler._stale = true;
                    handler.QueueRebuild();
                }, this);
            }

            // NOTE: cleared before the endpoints are read: a change from here on marks the table stale again. Reading them
            // can throw (a data source that fails to build): the table then stays stale, and the pipeline takes requests.
            _stale = false;
            IReadOnlyList<Microsoft.AspNetCore.Http.Endpoint> endpoints;
            try
            {
                endpoints = _endpoints.Endpoints;
            }
            catch
            {
                _stale = true;
                throw;
            }

            if (_table is { } current && ReferenceEquals(current.Source, endpoints))
            {
                return current;
            }

            DirectRouteTable built;
            try
            {
                built = DirectRouteTable.Build(endpoints, AppWidePolicies());
            }
            catch (Exception ex)
            {
                // Remembered for this endpoint list, so a pattern the table cannot read costs one log entry, not one per request.
                DirectLog.TableFailed(_logger, ex);
                _table = DirectRouteTable.Empty(endpoints);
                return _table;
            }


            foreach (var (routeId, reason) in built.Routes)
            {
                if (reason is null)
                {
                    DirectLog.RouteDirect(_logger, routeId);
                }
                else
                {
                    DirectLog.RouteNotDirect(_logger, routeId, reason);
                }
            }

            _table = built;
            return built;
        }
    }
}

internal static partial class DirectLog
{
    [LoggerMessage(EventId = 40, Level = LogLevel.Information, Message = "Route '{RouteId}' takes the direct path (no ASP.NET Core pipeline).")]
    public static partial void RouteDirect(ILogger logger, string routeId);

    [LoggerMessage(EventId = 41, Level = LogLevel.Information, Message = "Route '{RouteId}' stays on the ASP.NET Core pipeline: {Reason}.")]
    public static partial void RouteNotDirect(ILogger logger, string routeId, string reason);

    [LoggerMessage(EventId = 42, Level = LogLevel.Error, Message = "A direct-path request of route '{RouteId}' failed.")]
    public static partial void Failed(ILogger logger, string routeId, Exception exception);

    [LoggerMessage(EventId = 44, Level = LogLevel.Warning, Message = "The direct path could not decide on a request; the pipeline takes it.")]
    public static partial void DecisionFailed(ILogger logger, Exception exception);

    [LoggerMessage(EventId = 45, Level = LogLevel.Warning, Message = "An IDirectRequestObserver threw.")]
    public static partial void ObserverFailed(ILogger logger, Exception exception);

    [LoggerMessage(EventId = 46, Level = LogLevel.Error, Message = "The direct path could not read the app's endpoints; every request goes through the pipeline until they change.")]
    public static partial void TableFailed(ILogger logger, Exception exception);

    [LoggerMessage(EventId = 47, Level = LogLevel.Debug, Message = "Completing a direct-path response of route '{RouteId}' failed: {Exception}: {Message}")]
    public static partial void CompletionFailed(ILogger logger, string routeId, string exception, string message);

    [LoggerMessage(EventId = 43, Level = LogLevel.Debug, Message = "A direct-path request of route '{RouteId}' stopped: the client went away ({Exception}).")]
    public static partial void StoppedByClient(ILogger logger, string routeId, string exception);
}
