using System.Diagnostics.Metrics;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Host.Admin;

namespace Proxy.Host.Tests;

/// <summary>The dashboard's in-process reader of instruments by name. Meters come from a factory of the test's own, as the proxy app's do.</summary>
public sealed class MetricsAggregatorTests : IDisposable
{
    private readonly ServiceProvider _services = new ServiceCollection().AddMetrics().BuildServiceProvider();

    private IMeterFactory Factory => _services.GetRequiredService<IMeterFactory>();

    [Fact]
    public void Counters_SummedAndGroupedByClusterAndDestination()
    {
        using var aggregator = new MetricsAggregator(Factory);
        var meter = Factory.Create("Proxy.Forwarding");
        var queue = meter.CreateUpDownCounter<long>("proxy.forwarding.pool.queue_length");

        queue.Add(2, new("proxy.cluster", "a"), new("proxy.destination", "d1"));
        queue.Add(3, new("proxy.cluster", "a"), new("proxy.destination", "d2"));
        queue.Add(-1, new("proxy.cluster", "a"), new("proxy.destination", "d1"));

        var totals = aggregator.Find("proxy.forwarding.pool.queue_length")!;
        Assert.Equal(4, totals.Total);
        Assert.Equal(new Dictionary<string, double> { ["d1"] = 1, ["d2"] = 3 }, totals.SumBy(k => k.Destination));
    }

    [Fact]
    public void Observe_ObservableGauge_CurrentValuesNotAccumulated()
    {
        using var aggregator = new MetricsAggregator(Factory);
        var meter = Factory.Create("Proxy.Forwarding");
        var connections = 5;
        meter.CreateObservableUpDownCounter("proxy.forwarding.backend.connections", () => new[]
        {
            new Measurement<int>(connections, new KeyValuePair<string, object?>("proxy.cluster", "a")),
            new Measurement<int>(1, new KeyValuePair<string, object?>("proxy.cluster", "b")),
        });

        aggregator.Observe();
        aggregator.Observe();
        var first = aggregator.Find("proxy.forwarding.backend.connections")!.Total;
        connections = 2;
        aggregator.Observe();

        Assert.Equal(6, first);
        Assert.Equal(3, aggregator.Find("proxy.forwarding.backend.connections")!.Total);
    }

    [Fact]
    public void Percentiles_ValuesRecordedWhileWatched_NearestRank()
    {
        using var aggregator = new MetricsAggregator(Factory);
        var duration = Factory.Create("Proxy.Forwarding").CreateHistogram<double>("proxy.forwarding.request.duration");
        duration.Record(1000); // nobody watches: not read at all (counters and histograms cost only while watched)
        using (aggregator.Watch())
        {
            for (var i = 1; i <= 100; i++)
            {
                duration.Record(i);
            }
        }

        var totals = aggregator.Find("proxy.forwarding.request.duration")!;
        Assert.Equal(100, totals.Total);
        Assert.Equal([50, 99], totals.Percentiles(TimeSpan.FromMinutes(1), 0.5, 0.99)!);
    }

    [Fact]
    public void Meters_OfAnotherAppsFactory_Ignored()
    {
        using var aggregator = new MetricsAggregator(Factory);
        using var watch = aggregator.Watch();
        using var otherApp = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var other = otherApp.GetRequiredService<IMeterFactory>().Create("Proxy.Forwarding").CreateCounter<long>("proxy.forwarding.requests");
        var ours = Factory.Create("Proxy.Forwarding").CreateCounter<long>("proxy.forwarding.requests");

        other.Add(10);
        ours.Add(1);

        Assert.Equal(1, aggregator.Find("proxy.forwarding.requests")!.Total);
    }

    [Fact]
    public void Counters_ReadOnlyWhileWatched_LevelsAlways()
    {
        using var aggregator = new MetricsAggregator(Factory);
        var meter = Factory.Create("Proxy.Forwarding");
        var requests = meter.CreateCounter<long>("proxy.forwarding.requests");
        var active = meter.CreateUpDownCounter<long>("proxy.forwarding.active_requests");

        requests.Add(5); // nobody watches
        active.Add(2);
        using (aggregator.Watch())
        {
            requests.Add(1);
            active.Add(-1);
        }
        requests.Add(7); // nobody watches again
        active.Add(1);

        Assert.Equal(1, aggregator.Find("proxy.forwarding.requests")!.Total);
        Assert.Equal(2, aggregator.Find("proxy.forwarding.active_requests")!.Total); // 2 - 1 + 1: a level never misses a change
    }

    [Fact]
    public void ReadSet_OtherInstrumentsNamedButNotRead()
    {
        using var aggregator = new MetricsAggregator(Factory, new HashSet<string> { "proxy.forwarding.active_requests" });
        var meter = Factory.Create("Microsoft.AspNetCore.Hosting");
        var read = Factory.Create("Proxy.Forwarding").CreateUpDownCounter<long>("proxy.forwarding.active_requests");
        var unread = meter.CreateUpDownCounter<long>("http.server.active_requests");

        read.Add(3);
        unread.Add(4);

        Assert.Equal(3, aggregator.Find("proxy.forwarding.active_requests")!.Total);
        Assert.Equal(0, aggregator.Find("http.server.active_requests")!.Total);
        Assert.Contains("http.server.active_requests", aggregator.Names());
    }

    [Fact]
    public void DashboardFeed_ReadsOnlyInstrumentsItDeclares()
    {
        // The feed's read set must name every instrument it shows, or the admin endpoint's aggregator would never read it.
        var source = File.ReadAllText(Path.Combine(RepoRoot(), "src", "Proxy.Host", "Admin", "DashboardFeed.cs"));
        var shown = System.Text.RegularExpressions.Regex.Matches(source, @"(?:Find|Optional|Total)\(""([a-z0-9_.]+)""\)")
            .Select(m => m.Groups[1].Value).ToHashSet();

        Assert.NotEmpty(shown);
        Assert.Subset(DashboardFeed.InstrumentsRead.ToHashSet(), shown);
    }

    private static string RepoRoot()
    {
        var directory = new DirectoryInfo(AppContext.BaseDirectory);
        while (directory is not null && !File.Exists(Path.Combine(directory.FullName, "README.md")))
        {
            directory = directory.Parent;
        }

        return directory?.FullName ?? throw new InvalidOperationException("No README.md above " + AppContext.BaseDirectory);
    }

    public void Dispose() => _services.Dispose();
}
