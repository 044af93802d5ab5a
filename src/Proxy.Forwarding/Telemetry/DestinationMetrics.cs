using System.Diagnostics;
using System.Diagnostics.Metrics;
using Proxy.Forwarding.BackendPools;

namespace Proxy.Forwarding.Telemetry;

/// <summary>
/// One destination's instruments with its tags built once (proxy.cluster, proxy.destination): active requests, and the
/// admission queue (length and time waited). Made on a destination's first request and kept on its state (one per
/// cluster and destination id, by <see cref="ForwardingMetrics.ForDestination"/>), so the per request cost is an
/// Interlocked add; the meter reads the count when collected.
/// </summary>
// Shared by all requests to one destination: the count is Interlocked, the instruments thread-safe, the tags immutable.
internal sealed class DestinationMetrics : IAdmissionObserver
{
    private readonly KeyValuePair<string, object?>[] _tags;
    private readonly UpDownCounter<long> _queueLength;
    private readonly Histogram<double> _queueDuration;
    private long _active;

    public DestinationMetrics(string clusterId, string destinationId, UpDownCounter<long> queueLength, Histogram<double> queueDuration)
    {
        _tags = [new("proxy.cluster", clusterId), new("proxy.destination", destinationId)];
        _queueLength = queueLength;
        _queueDuration = queueDuration;
    }

    public void RequestStarted() => Interlocked.Increment(ref _active);

    public void RequestEnded() => Interlocked.Decrement(ref _active);

    /// <summary>The requests being forwarded to this destination now (proxy.forwarding.destination.active_requests).</summary>
    internal Measurement<long> ObserveActive() => new(Volatile.Read(ref _active), _tags);

    public long Queued()
    {
        _queueLength.Add(1, _tags);
        return Stopwatch.GetTimestamp();
    }

    public void Dequeued(long queuedTimestamp)
    {
        _queueLength.Add(-1, _tags);
        if (_queueDuration.Enabled)
        {
            _queueDuration.Record(Stopwatch.GetElapsedTime(queuedTimestamp).TotalSeconds, _tags);
        }
    }
}
