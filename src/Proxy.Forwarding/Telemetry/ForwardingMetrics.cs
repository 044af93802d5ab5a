using System.Diagnostics;
using System.Diagnostics.Metrics;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Telemetry;

/// <summary>
/// The "Proxy.Forwarding" meter: requests, active requests, duration, errors by kind and admission
/// queue length, visible to dotnet-counters and OpenTelemetry.
/// </summary>
// Shared by all requests: instruments are thread-safe.
internal sealed class ForwardingMetrics
{
    public const string MeterName = "Proxy.Forwarding";

    private readonly Counter<long> _requests;
    private readonly UpDownCounter<long> _active;
    private readonly Histogram<double> _duration;
    private readonly Counter<long> _errors;
    private readonly UpDownCounter<long> _queueLength;

    public ForwardingMetrics(IMeterFactory meterFactory)
    {
        var meter = meterFactory.Create(MeterName);
        _requests = meter.CreateCounter<long>("proxy.forwarding.requests", "{request}", "Requests forwarded (or refused) by the proxy.");
        _active = meter.CreateUpDownCounter<long>("proxy.forwarding.active_requests", "{request}", "Requests being forwarded now.");
        _duration = meter.CreateHistogram<double>("proxy.forwarding.request.duration", "s", "Time from the start of forwarding to the end of the response.");
        _errors = meter.CreateCounter<long>("proxy.forwarding.errors", "{error}", "Forwarding failures by kind (error.type).");
        _queueLength = meter.CreateUpDownCounter<long>("proxy.forwarding.pool.queue_length", "{request}", "Requests waiting for a backend admission slot.");
    }

    public void RequestStarted(string? cluster) => _active.Add(1, new KeyValuePair<string, object?>("proxy.cluster", cluster));

    public void RequestEnded(string? route, string? cluster, int statusCode, ForwarderError error, long startTimestamp)
    {
        var tags = new TagList
        {
            { "proxy.route", route },
            { "proxy.cluster", cluster },
            { "http.response.status_code", statusCode },
        };
        if (error != ForwarderError.None)
        {
            tags.Add("error.type", error.ToString());
            _errors.Add(1, tags);
        }

        _requests.Add(1, tags);
        _duration.Record(Stopwatch.GetElapsedTime(startTimestamp).TotalSeconds, tags);
        _active.Add(-1, new KeyValuePair<string, object?>("proxy.cluster", cluster));
    }

    public void QueueChanged(string cluster, string destination, int delta) =>
        _queueLength.Add(delta, new KeyValuePair<string, object?>("proxy.cluster", cluster), new KeyValuePair<string, object?>("proxy.destination", destination));
}
