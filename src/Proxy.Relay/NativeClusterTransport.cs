using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Protocols.Client;
using Proxy.Transport.Buffers;

namespace Proxy.Relay;

/// <summary>One cluster's native transport: a <see cref="BackendPool"/> per destination, built from the cluster's settings.</summary>
// Shared by all requests of the cluster; the pool map is concurrent.
internal sealed class NativeClusterTransport : IForwarderClusterTransport
{
    private readonly ConcurrentDictionary<string, BackendPool> _pools = new(StringComparer.Ordinal);
    private readonly BackendPoolSettings _settings;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly Dictionary<string, string> _tlsHosts = new(StringComparer.Ordinal);
    private readonly string _clusterId;
    private readonly IBackendConnectionMetrics? _connectionMetrics;

    /// <param name="sockets">The engine of the backend sockets and its threads (the server's <c>ProxyServer:Sockets:Engine</c>
    /// and <c>EpollThreads</c>).</param>
    public NativeClusterTransport(ClusterConfig cluster, ILogger logger, TimeProvider time, IBackendConnectionMetrics? connectionMetrics = null,
        (Proxy.Transport.Sockets.SocketEngine Engine, int EpollThreads) sockets = default)
    {
        _logger = logger;
        _time = time;
        _clusterId = cluster.ClusterId;
        _connectionMetrics = connectionMetrics;
        _settings = CreateSettings(cluster, sockets.Engine, sockets.EpollThreads);
        // A destination's Host key is its authority on the wire; on TLS its host is also the SNI name and the name the
        // certificate must match, as SocketsHttpHandler does with a Host header.
        foreach (var destination in cluster.Destinations?.Values ?? [])
        {
            if (destination.Host is { } host && destination.Address.StartsWith("https:", StringComparison.OrdinalIgnoreCase))
            {
                _tlsHosts[destination.Address] = new HostString(host).Host.Trim('[', ']');
            }
        }
    }

    internal BackendPoolSettings Settings => _settings;

    /// <summary>Tests: the destinations' pools opened so far.</summary>
    internal ICollection<BackendPool> Pools => _pools.Values;

    // An HTTP/2 connection builds its HEADERS list in the request's own (four pseudo-headers, and content-length).
    public int FieldsAddedToHead => _settings.PreferHttp2 ? 5 : 0;

    /// <summary>
    /// The HttpClient semantics of the cluster's HttpRequest Version and VersionPolicy (default 2.0, RequestVersionOrLower):
    /// cleartext speaks HTTP/2 (h2c, prior knowledge) only for Version 2 with Exact or OrHigher, as SocketsHttpHandler does;
    /// TLS offers h2 by ALPN unless Version is 1.x with Exact or OrLower.
    /// </summary>
    private static BackendPoolSettings CreateSettings(ClusterConfig cluster, Proxy.Transport.Sockets.SocketEngine socketEngine, int epollThreads)
    {
        var client = cluster.HttpClient;
        var request = cluster.HttpRequest;
        // The values were validated with the configuration (1.0, 1.1, 2, 3; the three policies).
        var version = request?.Version is { } v && Version.TryParse(v.Contains('.') ? v : v + ".0", out var parsed) ? parsed : HttpVersion.Version20;
        var policy = request?.VersionPolicy is { } p && Enum.TryParse<HttpVersionPolicy>(p, ignoreCase: true, out var parsedPolicy)
            ? parsedPolicy
            : HttpVersionPolicy.RequestVersionOrLower;
        var wantsHttp2 = version.Major >= 2 || policy == HttpVersionPolicy.RequestVersionOrHigher;
        var exactHttp2 = version.Major >= 2 && policy != HttpVersionPolicy.RequestVersionOrLower;
        var tlsDestinations = cluster.Destinations?.Values.All(d => d.Address.StartsWith("https:", StringComparison.OrdinalIgnoreCase)) == true;
        return new BackendPoolSettings
        {
            PreferHttp2 = tlsDestinations ? wantsHttp2 : exactHttp2,
            Http2Only = exactHttp2 && policy == HttpVersionPolicy.RequestVersionExact,
            MaxConnections = client?.MaxConnectionsPerServer ?? int.MaxValue,
            EnableMultipleHttp2Connections = client?.EnableMultipleHttp2Connections ?? true,
            ConnectTimeout = client?.ConnectTimeout ?? TimeSpan.FromSeconds(10),
            IdleTimeout = client?.PooledConnectionIdleTimeout ?? TimeSpan.FromSeconds(60),
            Lifetime = client?.PooledConnectionLifetime ?? Timeout.InfiniteTimeSpan,
            DangerousAcceptAnyServerCertificate = client?.DangerousAcceptAnyServerCertificate == true,
            SslProtocols = client?.SslProtocols ?? System.Security.Authentication.SslProtocols.None,
            Sockets = new() { InlineScheduling = true, Engine = socketEngine, EpollThreads = epollThreads },
            Http2 = new Proxy.Protocols.Http2.Client.Http2ClientOptions
            {
                KeepAlivePingDelay = client?.KeepAlivePingDelay ?? TimeSpan.FromSeconds(30),
                KeepAlivePingTimeout = client?.KeepAlivePingTimeout ?? TimeSpan.FromSeconds(20),
                // The front streams' pool: small unpinned blocks, idle ones freed (see StreamDefault).
                Protocol = { StreamMemoryPool = BlockMemoryPool.StreamDefault, StreamMinimumSegmentSize = BlockMemoryPool.StreamTinyBlockSize },
            },
        };
    }

    public ValueTask<ForwarderBackendCall> StartAsync(string? destinationId, string destinationPrefix, ForwarderRequestHead head, CancellationToken cancellationToken)
    {
        var pool = _pools.GetOrAdd(destinationPrefix, static (prefix, state) => new BackendPool(prefix, state.Self._settings, state.Self._logger, state.Self._time,
            state.Self._connectionMetrics is { } metrics ? new BackendPoolMetrics(metrics, state.Self._clusterId, state.DestinationId ?? prefix) : null,
            state.Self._tlsHosts.GetValueOrDefault(prefix)),
            (Self: this, DestinationId: destinationId));
        var request = new BackendRequest
        {
            Method = head.Method,
            Scheme = pool.Scheme,
            Authority = head.Authority,
            PathAndQuery = head.PathAndQuery,
            HasBody = head.HasBody,
            ContentLength = head.HasBody ? head.ContentLength : null,
            HeadWaitsForBody = head.HasBody && head.BodyFollowsAtOnce,
            ContinueOnEventLoop = head.ContinueOnEventLoop,
            // On the pipeline the request runs on the thread pool: its client connection's event loop, from our server's
            // features (on the direct path the request runs on that loop, which the pool reads itself).
            EventLoop = head.HttpContext?.Features is Proxy.Server.Features.RequestFeatures features ? features.Exchange.Connection.EventLoop : -1,
            Headers = head.Headers, // the forwarder is done with it: held, not copied
        };
        var call = new NativeBackendCall(pool, request, ClientExchangeOf(head.HttpContext));
        // NOTE: not an async method: an open that completes at once (a ready connection, the head written) returns the
        // call without a state machine; only one that waits goes async.
        ValueTask open;
        try
        {
            open = call.OpenAsync(cancellationToken);
            if (open.IsCompletedSuccessfully)
            {
                open.GetAwaiter().GetResult();
                return new ValueTask<ForwarderBackendCall>(call);
            }
        }
        catch (Exception ex) when (TransportFailureOf(ex) is { } failure)
        {
            throw failure;
        }
        return OpenWaitingAsync(call, open);

        static async ValueTask<ForwarderBackendCall> OpenWaitingAsync(NativeBackendCall call, ValueTask open)
        {
            try
            {
                await open.ConfigureAwait(false);
            }
            catch (Exception ex) when (TransportFailureOf(ex) is { } failure)
            {
                throw failure;
            }
            return call;
        }
    }

    /// <summary>What the forwarder is told of an open that failed; null for an exception it takes as it is (a cancellation).</summary>
    private static ForwarderTransportException? TransportFailureOf(Exception exception) => exception switch
    {
        BackendException ex => new ForwarderTransportException((ForwarderTransportFailure)ex.Failure, ex.Message, ex.ErrorCode, ex),
        // A field we must not send: the forwarder's validation should have caught it; never put it on the wire.
        ArgumentException ex => new ForwarderTransportException(ForwarderTransportFailure.ProtocolError, ex.Message, inner: ex),
        _ => null,
    };

    /// <summary>
    /// Our server's exchange behind <paramref name="context"/> while its response body is still the server's own; null on
    /// Kestrel, on the direct path (no HttpContext), or when middleware replaced the body (compression, the access log's
    /// byte counts): such a body must see every byte, so nothing is lent past it.
    /// </summary>
    internal static Proxy.Protocols.HttpExchange? ClientExchangeOf(HttpContext? context) =>
        context?.Features is Proxy.Server.Features.RequestFeatures features
            && ReferenceEquals(((Microsoft.AspNetCore.Http.Features.IFeatureCollection)features).Get<Microsoft.AspNetCore.Http.Features.IHttpResponseBodyFeature>(), features)
            ? features.Exchange
            : null;

    /// <summary>The cluster was replaced or removed: its pools retire (idle connections close; late requests still work).</summary>
    public void Dispose()
    {
        foreach (var pool in _pools.Values)
        {
            pool.Retire();
        }
    }
}
