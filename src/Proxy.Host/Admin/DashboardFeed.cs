using System.Text.Json;
using Proxy.Forwarding.Configuration;

namespace Proxy.Host.Admin;

/// <summary>
/// The dashboard's data: one JSON snapshot a second, built from <see cref="MetricsAggregator"/> (instruments read by
/// name) and the forwarding layer's cluster state, with a short history of rates for the chart. The sampler runs only
/// while at least one dashboard is connected.
/// </summary>
// Shared by the admin app's requests; the sampler loop is the only writer of _previous, _history and _latest.
internal sealed class DashboardFeed(MetricsAggregator metrics, IProxyStateLookup state, TimeProvider time) : IDisposable
{
    public const int HistoryLength = 60;

    /// <summary>How far back latency percentiles look.</summary>
    public static readonly TimeSpan LatencyWindow = TimeSpan.FromSeconds(30);

    private static readonly JsonSerializerOptions Json = new(JsonSerializerDefaults.Web);
    private readonly Lock _lock = new();
    private readonly Queue<HistoryPoint> _history = new();
    private TaskCompletionSource<string> _next = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private (double Requests, double Errors, long Timestamp)? _previous;
    private string? _latest;
    private int _subscribers;
    private CancellationTokenSource? _sampling;

    /// <summary>
    /// The snapshots for one dashboard: the latest at once, then one a second until <paramref name="cancellationToken"/>.
    /// </summary>
    public async IAsyncEnumerable<string> SubscribeAsync([System.Runtime.CompilerServices.EnumeratorCancellation] CancellationToken cancellationToken)
    {
        using var watch = metrics.Watch();
        Task<string> next;
        string first;
        lock (_lock)
        {
            if (_subscribers++ == 0)
            {
                _sampling = new CancellationTokenSource();
                _ = SampleAsync(_sampling.Token);
            }

            next = _next.Task;
            first = _latest ??= Sample();
        }

        try
        {
            yield return first;
            while (true)
            {
                var snapshot = await next.WaitAsync(cancellationToken).ConfigureAwait(false);
                lock (_lock)
                {
                    next = _next.Task;
                }

                yield return snapshot;
            }
        }
        finally
        {
            lock (_lock)
            {
                if (--_subscribers == 0)
                {
                    // The next dashboard starts from fresh numbers, and its first rate is not averaged over the idle time.
                    _latest = null;
                    _previous = null;
                    _sampling?.Cancel();
                    _sampling?.Dispose();
                    _sampling = null;
                }
            }
        }
    }

    /// <summary>A snapshot now (admin <c>/dashboard/snapshot</c>); latencies need a dashboard watching to have values.</summary>
    public string Current()
    {
        lock (_lock)
        {
            return _latest ?? Sample();
        }
    }

    private async Task SampleAsync(CancellationToken cancellationToken)
    {
        using var timer = new PeriodicTimer(TimeSpan.FromSeconds(1), time);
        try
        {
            while (await timer.WaitForNextTickAsync(cancellationToken).ConfigureAwait(false))
            {
                lock (_lock)
                {
                    _latest = Sample();
                    var published = _next;
                    _next = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
                    published.TrySetResult(_latest);
                }
            }
        }
        catch (OperationCanceledException)
        {
            // The last dashboard left.
        }
    }

    // Called under _lock.
    private string Sample()
    {
        metrics.Observe();
        var now = time.GetTimestamp();
        var requests = Total("proxy.forwarding.requests");
        var errors = Total("proxy.forwarding.errors");
        double? requestRate = null, errorRate = null;
        if (_previous is { } previous)
        {
            var seconds = time.GetElapsedTime(previous.Timestamp, now).TotalSeconds;
            if (seconds > 0)
            {
                requestRate = Math.Max(0, requests - previous.Requests) / seconds;
                errorRate = Math.Max(0, errors - previous.Errors) / seconds;
                _history.Enqueue(new HistoryPoint(time.GetUtcNow().ToUnixTimeMilliseconds(), requestRate.Value, errorRate.Value));
                while (_history.Count > HistoryLength)
                {
                    _history.Dequeue();
                }
            }
        }

        _previous = (requests, errors, now);
        var latency = metrics.Find("proxy.forwarding.request.duration")?.Percentiles(LatencyWindow, 0.5, 0.99);
        var snapshot = new DashboardSnapshot(
            Time: time.GetUtcNow(),
            Connections: Connections(),
            ActiveStreams: Optional("proxy.server.http2.active_streams"),
            StreamResets: Optional("proxy.server.http2.stream_resets"),
            Requests: new RateTotals(requests, requestRate, Optional("proxy.forwarding.active_requests")),
            Errors: new ErrorTotals(errors, errorRate, metrics.Find("proxy.forwarding.errors")?.SumBy(k => k.ErrorType) ?? []),
            LatencyMs: latency is null ? null : new Latency(latency[0] * 1000, latency[1] * 1000, LatencyWindow.TotalSeconds),
            HttpServerRequests: Optional("http.server.request.duration"),
            SseStreams: Optional("proxy.forwarding.sse.active_streams"),
            Clusters: Clusters(),
            History: _history.ToList(),
            Instruments: metrics.Names());
        return JsonSerializer.Serialize(snapshot, Json);
    }

    /// <summary>Every instrument this feed reads: the aggregator reads these and no others.</summary>
    public static readonly IReadOnlySet<string> InstrumentsRead = new HashSet<string>(StringComparer.Ordinal)
    {
        "kestrel.active_connections", "proxy.server.connections", "proxy.server.http2.active_streams", "proxy.server.http2.stream_resets",
        "proxy.forwarding.requests", "proxy.forwarding.errors", "proxy.forwarding.active_requests", "proxy.forwarding.request.duration",
        "proxy.forwarding.sse.active_streams", "proxy.forwarding.backend.connections", "http.server.request.duration",
    };

    private double Total(string name) => metrics.Find(name)?.Total ?? 0;

    /// <summary>Null (shown as "n/a") while no meter has published the instrument.</summary>
    private double? Optional(string name) => metrics.Find(name)?.Total;

    private ConnectionTotals Connections()
    {
        // Open now: kestrel.active_connections (Kestrel's meter, or Proxy.Server's instrument of the same name). By protocol
        // and TLS: proxy.server.connections, a counter of connections since start, tagged network.protocol.version and tls.
        var byKind = metrics.Find("proxy.server.connections");
        var byProtocol = byKind?.SumBy(k => k.ProtocolVersion) ?? [];
        return new ConnectionTotals(
            Active: Optional("kestrel.active_connections"),
            Http1SinceStart: byKind is null ? null : byProtocol.GetValueOrDefault("1.1") + byProtocol.GetValueOrDefault("1.0"),
            Http2SinceStart: byKind is null ? null : byProtocol.GetValueOrDefault("2"),
            TlsSinceStart: byKind?.SumBy(k => k.Tls).GetValueOrDefault("true"));
    }

    private List<ClusterView> Clusters()
    {
        var active = metrics.Find("proxy.forwarding.active_requests")?.SumBy(k => k.Cluster) ?? [];
        var sse = metrics.Find("proxy.forwarding.sse.active_streams")?.SumBy(k => k.Cluster);
        var backendConnections = metrics.Find("proxy.forwarding.backend.connections")?.SumBy(k => k.Cluster is null ? null : $"{k.Cluster}/{k.Destination}");
        return state.Clusters.OrderBy(c => c.ClusterId, StringComparer.Ordinal).Select(cluster => new ClusterView(
            cluster.ClusterId,
            active.GetValueOrDefault(cluster.ClusterId),
            sse?.GetValueOrDefault(cluster.ClusterId),
            cluster.Destinations.Select(d => new DestinationView(
                d.DestinationId,
                ConfigDump.WithoutUserInfo(d.Config.Address),
                d.Health.ToString(),
                d.ConcurrentRequestCount,
                d.QueuedRequestCount,
                backendConnections?.GetValueOrDefault($"{cluster.ClusterId}/{d.DestinationId}"))).ToList())).ToList();
    }

    public void Dispose()
    {
        lock (_lock)
        {
            _sampling?.Cancel();
        }
    }
}

internal sealed record DashboardSnapshot(
    DateTimeOffset Time,
    ConnectionTotals Connections,
    double? ActiveStreams,
    double? StreamResets,
    RateTotals Requests,
    ErrorTotals Errors,
    Latency? LatencyMs,
    double? HttpServerRequests,
    double? SseStreams,
    List<ClusterView> Clusters,
    List<HistoryPoint> History,
    List<string> Instruments);

internal sealed record ConnectionTotals(double? Active, double? Http1SinceStart, double? Http2SinceStart, double? TlsSinceStart);

internal sealed record RateTotals(double Total, double? PerSecond, double? Active);

internal sealed record ErrorTotals(double Total, double? PerSecond, Dictionary<string, double> ByType);

internal sealed record Latency(double P50, double P99, double WindowSeconds);

internal sealed record HistoryPoint(long Time, double Requests, double Errors);

internal sealed record ClusterView(string Id, double ActiveRequests, double? SseStreams, List<DestinationView> Destinations);

internal sealed record DestinationView(string Id, string Address, string Health, int ActiveRequests, int Queued, double? BackendConnections);
