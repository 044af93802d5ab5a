using System.Diagnostics;
using System.Diagnostics.Metrics;
using Proxy.Forwarding.BackendPools;

namespace Proxy.Forwarding.Telemetry;

/// <summary>
/// One destination's instruments with its tags built once (proxy.cluster, proxy.destination): active requests, and the
/// admission queue (length and time waited). Made on a destination's first request and kept on its state, so the per
/// request cost is an Enabled check and an Add over a cached array, with no closure and no tag list.
/// </summary>
// Shared by all requests to one destination: instruments are thread-safe, the tags immutable.
internal sealed class DestinationMetrics : IAdmissionObserver
{
    private readonly KeyValuePair<string, object?>[] _tags;
    private readonly UpDownCounter<long> _active;
    private readonly UpDownCounter<long> _queueLength;
    private readonly Histogram<double> _queueDuration;

    public DestinationMetrics(string clusterId, string destinationId, UpDownCounter<long> active, UpDownCounter<long> queueLength, Histogram<double> queueDuration)
    {
        _tags = [new("proxy.cluster", clusterId), new("proxy.destination", destinationId)];
        _active = active;
        _queueLength = queueLength;
        _queueDuration = queueDuration;
    }

    /// <summary>Returns whether the request was counted, so its end takes back exactly that.</summary>
    public bool RequestStarted()
    {
        if (!_active.Enabled)
        {
            return false;
        }
        _active.Add(1, _tags);
        return true;
    }

    public void RequestEnded() => _active.Add(-1, _tags);

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
