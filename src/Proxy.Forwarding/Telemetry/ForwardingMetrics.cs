using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Telemetry;

/// <summary>
/// The "Proxy.Forwarding" meter: requests, active requests (per cluster and per destination), duration, errors by kind,
/// the admission queue (length, time waited), open native backend connections and relayed event streams, visible to
/// dotnet-counters and OpenTelemetry.
/// </summary>
// Shared by all requests: instruments are thread-safe.
internal sealed class ForwardingMetrics : IBackendConnectionMetrics
{
    public const string MeterName = "Proxy.Forwarding";

    // NOTE: requests are counted here too, per (route, cluster, status, error), and the meter reads the counts when
    // collected (an observable counter): a lookup keyed by two strings and an Interlocked add per request, where a
    // Counter's measurement went through OpenTelemetry's tag-set lookup (three keys and three values hashed and
    // compared, about 200 ns: one of the three per-request measurements that were 0.7 us of a proxied GET).
    private readonly ConcurrentDictionary<RequestKey, StrongBox<long>> _requestCounts = new();
    // NOTE: the per-request levels (active requests per cluster and per destination) are counts the meter reads when
    // collected (observable instruments): an Interlocked add per request instead of a measurement delivered to every
    // listener (OpenTelemetry's aggregator and the dashboard's) at its start and end. Entries stay for the process's
    // life: one per cluster and per (cluster, destination) ever configured, each reporting 0 once idle.
    private readonly ConcurrentDictionary<string, StrongBox<long>> _activeByCluster = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<(string Cluster, string Destination), DestinationMetrics> _destinations = new();
    private readonly Histogram<double> _duration;
    private readonly Counter<long> _errors;
    private readonly UpDownCounter<long> _queueLength;
    private readonly Histogram<double> _queueDuration;
    private readonly UpDownCounter<long> _backendConnections;
    private readonly UpDownCounter<long> _sseActive;

    private static readonly double[] ShortSeconds = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

    public ForwardingMetrics(IMeterFactory meterFactory)
    {
        var meter = meterFactory.Create(MeterName);
        meter.CreateObservableCounter("proxy.forwarding.requests", ObserveRequests, "{request}", "Requests forwarded (or refused) by the proxy.");
        meter.CreateObservableUpDownCounter("proxy.forwarding.active_requests", ObserveActive, "{request}", "Requests being forwarded now.");
        _duration = meter.CreateHistogram<double>("proxy.forwarding.request.duration", "s", "Time from the start of forwarding to the end of the response.");
        _errors = meter.CreateCounter<long>("proxy.forwarding.errors", "{error}", "Forwarding failures by kind (error.type).");
        _queueLength = meter.CreateUpDownCounter<long>("proxy.forwarding.pool.queue_length", "{request}", "Requests waiting for a backend admission slot.");
        meter.CreateObservableUpDownCounter("proxy.forwarding.destination.active_requests", ObserveDestinations, "{request}",
            "Requests being forwarded now, per destination.");
        _queueDuration = meter.CreateHistogram("proxy.forwarding.pool.queue.duration", "s",
            "Time a request waited in a destination's admission queue (only requests that had to wait).",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = ShortSeconds });
        _backendConnections = meter.CreateUpDownCounter<long>("proxy.forwarding.backend.connections", "{connection}",
            "Open backend connections of the native relay (network.protocol.version 1.1 or 2).");
        _sseActive = meter.CreateUpDownCounter<long>("proxy.forwarding.sse.active_streams", "{stream}",
            "Event-stream (text/event-stream) responses being relayed now.");
    }

    /// <summary>One destination's instruments, to be kept on its state (the same object for the same ids, across reloads).</summary>
    public DestinationMetrics ForDestination(string clusterId, string destinationId) =>
        _destinations.GetOrAdd((clusterId, destinationId), static (key, self) => new(key.Cluster, key.Destination, self._queueLength, self._queueDuration), this);

    private IEnumerable<Measurement<long>> ObserveRequests()
    {
        foreach (var (key, count) in _requestCounts)
        {
            var tags = new TagList
            {
                { "proxy.route", key.Route },
                { "proxy.cluster", key.Cluster },
                { "http.response.status_code", BoxedStatus(key.StatusCode) },
            };
            if (key.Error != ForwarderError.None)
            {
                tags.Add("error.type", key.Error.ToString());
            }
            yield return new(Volatile.Read(ref count.Value), tags);
        }
    }

    /// <summary>One counted kind of request: the tags of <c>proxy.forwarding.requests</c>.</summary>
    private readonly record struct RequestKey(string? Route, string? Cluster, int StatusCode, ForwarderError Error);

    private IEnumerable<Measurement<long>> ObserveActive()
    {
        foreach (var (cluster, count) in _activeByCluster)
        {
            yield return new(Volatile.Read(ref count.Value), new KeyValuePair<string, object?>("proxy.cluster", cluster.Length == 0 ? null : cluster));
        }
    }

    private IEnumerable<Measurement<long>> ObserveDestinations()
    {
        foreach (var destination in _destinations.Values)
        {
            yield return destination.ObserveActive();
        }
    }

    private StrongBox<long> ActiveOf(string? cluster) =>
        _activeByCluster.GetOrAdd(cluster ?? "", static _ => new StrongBox<long>());

    public void ConnectionOpened(string clusterId, string destinationId, string protocolVersion) =>
        _backendConnections.Add(1, ConnectionTags(clusterId, destinationId, protocolVersion));

    public void ConnectionClosed(string clusterId, string destinationId, string protocolVersion) =>
        _backendConnections.Add(-1, ConnectionTags(clusterId, destinationId, protocolVersion));

    private static TagList ConnectionTags(string clusterId, string destinationId, string protocolVersion) => new()
    {
        { "proxy.cluster", clusterId },
        { "proxy.destination", destinationId },
        { "network.protocol.version", protocolVersion },
    };

    /// <summary>
    /// Counts a relayed event stream from here to the end of the caller's scope (<c>using var</c>). Nothing is counted
    /// when <paramref name="eventStream"/> is false or nobody listens.
    /// </summary>
    public SseStreamScope SseStream(bool eventStream, IReverseProxyFeature? proxy)
    {
        if (!eventStream || !_sseActive.Enabled)
        {
            return default;
        }
        var scope = new SseStreamScope(_sseActive, proxy?.RouteId, proxy?.ClusterId);
        _sseActive.Add(1, scope.Tags);
        return scope;
    }

    /// <summary>The -1 of one counted event stream.</summary>
    internal readonly struct SseStreamScope(UpDownCounter<long> counter, string? route, string? cluster) : IDisposable
    {
        public TagList Tags => new() { { "proxy.route", route }, { "proxy.cluster", cluster } };

        public void Dispose() => counter?.Add(-1, Tags);
    }

    /// <summary>A forwarded request from its start: its cluster's active count (looked up once) and its start time.</summary>
    internal readonly struct RequestScope(StrongBox<long> active, long startTimestamp)
    {
        public StrongBox<long> Active { get; } = active;

        public long StartTimestamp { get; } = startTimestamp;
    }

    public RequestScope RequestStarted(string? cluster)
    {
        var active = ActiveOf(cluster);
        Interlocked.Increment(ref active.Value);
        return new RequestScope(active, Stopwatch.GetTimestamp());
    }

    public void RequestEnded(RequestScope started, string? route, string? cluster, int statusCode, ForwarderError error)
    {
        var tags = new TagList
        {
            { "proxy.route", route },
            { "proxy.cluster", cluster },
            { "http.response.status_code", BoxedStatus(statusCode) },
        };
        if (error != ForwarderError.None)
        {
            tags.Add("error.type", error.ToString());
            _errors.Add(1, tags);
        }

        Interlocked.Increment(ref CountOf(route, cluster, statusCode, error).Value);
        _duration.Record(Stopwatch.GetElapsedTime(started.StartTimestamp).TotalSeconds, tags);
        Interlocked.Decrement(ref started.Active.Value);
    }

    /// <summary>The count of one kind of request: the one this thread counted last when it is the same kind, else the map's.</summary>
    /// <remarks>
    /// NOTE: most requests a thread ends are of the kind it ended last (one route, one cluster, 200): the same strings
    /// and status skip the map's lookup, which hashes both strings (0.7-1% of a proxied request's samples with the rest of
    /// this method). A reference match means equal values, so the box is the map's entry for them; entries are never
    /// removed, so a remembered box is never orphaned. The slot names its owner: a process may hold several hosts.
    /// </remarks>
    private StrongBox<long> CountOf(string? route, string? cluster, int statusCode, ForwarderError error)
    {
        var last = t_lastCount ??= new LastCount();
        if (ReferenceEquals(last.Owner, this) && ReferenceEquals(last.Route, route) && ReferenceEquals(last.Cluster, cluster)
            && last.StatusCode == statusCode && last.Error == error)
        {
            return last.Count!;
        }
        var count = _requestCounts.GetOrAdd(new RequestKey(route, cluster, statusCode, error), static _ => new StrongBox<long>());
        (last.Owner, last.Route, last.Cluster, last.StatusCode, last.Error, last.Count) = (this, route, cluster, statusCode, error, count);
        return count;
    }

    [ThreadStatic]
    private static LastCount? t_lastCount;

    // Per thread: the kind of request the thread counted last, and its count.
    private sealed class LastCount
    {
        public ForwardingMetrics? Owner;
        public string? Route;
        public string? Cluster;
        public int StatusCode;
        public ForwarderError Error;
        public StrongBox<long>? Count;
    }

    // NOTE: a tag value is an object: the status codes a response can carry are boxed once, not once per request.
    private static readonly object[] s_statusBoxes = CreateStatusBoxes();

    private static object[] CreateStatusBoxes()
    {
        var boxes = new object[500];
        for (var i = 0; i < boxes.Length; i++)
        {
            boxes[i] = 100 + i;
        }

        return boxes;
    }

    internal static object BoxedStatus(int statusCode) =>
        (uint)(statusCode - 100) < (uint)s_statusBoxes.Length ? s_statusBoxes[statusCode - 100] : statusCode;

}
