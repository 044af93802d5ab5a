using System.Diagnostics.Metrics;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// <c>proxy.forwarding.requests</c> counts each kind of request (route, cluster, status, error) on its own, also when one
/// thread ends requests of different kinds and of two hosts' metrics in turn (the count a thread used last is
/// remembered per thread).
/// </summary>
public sealed class ForwardingMetricsCountTests
{
    [Fact]
    public void RequestCounts_KindsAndOwnersInTurnOnOneThread_EachCountedOnItsOwn()
    {
        using var servicesA = new ServiceCollection().AddMetrics().BuildServiceProvider();
        using var servicesB = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var factoryA = servicesA.GetRequiredService<IMeterFactory>();
        var factoryB = servicesB.GetRequiredService<IMeterFactory>();
        var a = new ForwardingMetrics(factoryA);
        var b = new ForwardingMetrics(factoryB);

        void End(ForwardingMetrics metrics, string route, int status, ForwarderError error = ForwarderError.None) =>
            metrics.RequestEnded(metrics.RequestStarted("c1"), route, "c1", status, error);

        End(a, "r1", 200);
        End(a, "r1", 200);
        End(b, "r1", 200);
        End(a, "r1", 200);
        End(a, "r1", 404);
        End(a, "r1", 200);
        End(b, "r1", 200);
        End(a, new string("r1".AsSpan()), 200); // an equal route string that is another object
        End(a, "r2", 200);
        End(a, "r2", 502, ForwarderError.Request);
        End(a, "r2", 200);

        Assert.Equal(new Dictionary<string, long> { ["r1 200"] = 5, ["r1 404"] = 1, ["r2 200"] = 2, ["r2 502 Request"] = 1 }, Counts(factoryA));
        Assert.Equal(new Dictionary<string, long> { ["r1 200"] = 2 }, Counts(factoryB));
    }

    /// <summary>The observable counter's current values under one meter factory, by "route status [error]".</summary>
    private static Dictionary<string, long> Counts(IMeterFactory factory)
    {
        var counts = new Dictionary<string, long>();
        using var listener = new MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Name == "proxy.forwarding.requests" && ReferenceEquals(instrument.Meter.Scope, factory))
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<long>((_, value, tags, _) =>
        {
            string? route = null, status = null, error = null;
            foreach (var (key, tag) in tags)
            {
                switch (key)
                {
                    case "proxy.route": route = (string?)tag; break;
                    case "http.response.status_code": status = tag?.ToString(); break;
                    case "error.type": error = (string?)tag; break;
                }
            }
            counts[error is null ? $"{route} {status}" : $"{route} {status} {error}"] = value;
        });
        listener.Start();
        listener.RecordObservableInstruments();
        return counts;
    }
}
