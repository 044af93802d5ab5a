using System.Diagnostics;
using System.Diagnostics.Metrics;

namespace Proxy.Host.Admin;

/// <summary>
/// Reads the proxy's instruments by name, in process, for the dashboard: sums of counters and up-down counters
/// (grouped by the few tags the dashboard shows), counts of histograms, and, while a dashboard watches, the values
/// histograms record (for percentiles over a sliding window). An instrument that does not exist yet (another
/// build's meter) shows up as soon as a meter publishes it.
/// </summary>
/// <remarks>
/// NOTE: sums are kept from startup, not from when a dashboard opens: an up-down counter read from the middle would
/// count the streams that end but not the ones already open. That costs one Interlocked add (and a small lock for
/// grouped instruments) per measurement; histogram values, the expensive part, are only kept while someone watches.
/// Instruments of meters made by another app's IMeterFactory (the admin app itself, the demo backends) are ignored:
/// the dashboard's own SSE stream is not proxy traffic.
/// </remarks>
// Shared: measurement callbacks run on any request thread; each instrument's state has its own lock.
internal sealed class MetricsAggregator : IDisposable
{
    /// <summary>The meters the dashboard reads: ours, and ASP.NET Core's request and Kestrel meters.</summary>
    public static readonly string[] MeterNames = ["Proxy.Server", "Proxy.Forwarding", "Microsoft.AspNetCore.Hosting", "Microsoft.AspNetCore.Server.Kestrel"];

    /// <summary>The tags measurements are grouped by (absent tags group as null).</summary>
    public static readonly string[] GroupTags = ["proxy.cluster", "proxy.destination", "network.protocol.version", "error.type", "tls"];

    private const int HistogramCapacity = 8192;
    // NOTE: two listeners. Levels (up-down counters, observable instruments: connections, requests and streams open
    // now) are read from the start, since a level read from later on would go negative. Everything else (counters and
    // histograms: several measurements per request, each a lock and a dictionary update here) is read only while a
    // dashboard watches: measured on gRPC unary 1x70, reading all of it all the time cost 20-70% more CPU per call.
    private readonly MeterListener _levels = new();
    private MeterListener? _flows;
    private readonly object? _scope;
    private readonly IReadOnlySet<string>? _read;
    private readonly Dictionary<string, InstrumentTotals> _instruments = new(StringComparer.Ordinal);
    private readonly Lock _instrumentsLock = new();
    private readonly Lock _watchLock = new();
    private int _watchers;

    /// <param name="scope">The proxy app's IMeterFactory: meters it made (and meters made without one) are read.</param>
    /// <param name="read">
    /// The instruments whose measurements are read (the dashboard's); the others of those meters are only named in
    /// <see cref="Names"/>, so a request pays nothing here for instruments nobody shows. Null: all of them.
    /// </param>
    public MetricsAggregator(object? scope, IReadOnlySet<string>? read = null)
    {
        _scope = scope;
        _read = read;
        Configure(_levels, levels: true);
        _levels.Start();
    }

    private void Configure(MeterListener listener, bool levels)
    {
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (Array.IndexOf(MeterNames, instrument.Meter.Name) >= 0 && (instrument.Meter.Scope is null || ReferenceEquals(instrument.Meter.Scope, _scope))
                && IsLevel(instrument) == levels)
            {
                var totals = Totals(instrument);
                if (_read is null || _read.Contains(instrument.Name))
                {
                    l.EnableMeasurementEvents(instrument, totals);
                }
            }
        };
        listener.SetMeasurementEventCallback<long>((i, value, tags, state) => ((InstrumentTotals)state!).Record(value, tags));
        listener.SetMeasurementEventCallback<int>((i, value, tags, state) => ((InstrumentTotals)state!).Record(value, tags));
        listener.SetMeasurementEventCallback<double>((i, value, tags, state) => ((InstrumentTotals)state!).Record(value, tags));
    }

    private static bool IsLevel(Instrument instrument) =>
        instrument.IsObservable || (instrument.GetType().IsGenericType && instrument.GetType().GetGenericTypeDefinition() == typeof(UpDownCounter<>));

    /// <summary>
    /// Counters and histograms are read while at least one watcher is registered (their totals restart when the first
    /// watcher comes); dispose the result to stop watching.
    /// </summary>
    public IDisposable Watch()
    {
        lock (_watchLock)
        {
            if (_watchers++ == 0)
            {
                lock (_instrumentsLock)
                {
                    foreach (var totals in _instruments.Values)
                    {
                        if (!totals.IsLevel)
                        {
                            totals.Reset();
                        }
                    }
                }

                _flows = new MeterListener();
                Configure(_flows, levels: false);
                _flows.Start();
            }
        }

        return new Watcher(this);
    }

    private void Unwatch()
    {
        lock (_watchLock)
        {
            if (--_watchers == 0)
            {
                _flows?.Dispose();
                _flows = null;
            }
        }
    }

    private bool Watching => Volatile.Read(ref _watchers) > 0;

    /// <summary>The instrument's totals, or null when no measurement has been published under that name.</summary>
    public InstrumentTotals? Find(string name)
    {
        lock (_instrumentsLock)
        {
            return _instruments.GetValueOrDefault(name);
        }
    }

    /// <summary>
    /// Takes the current values of observable instruments (gauges and observable counters report absolute values when
    /// asked, not changes): each one's totals restart from zero and its callbacks add up what they report now.
    /// </summary>
    public void Observe()
    {
        List<InstrumentTotals> observable;
        lock (_instrumentsLock)
        {
            observable = _instruments.Values.Where(t => t.IsObservable).ToList();
        }

        observable.ForEach(t => t.Reset());
        _levels.RecordObservableInstruments();
    }

    /// <summary>Names of every instrument published so far, read or not (the dashboard lists them, so a missing one is easy to spot).</summary>
    public List<string> Names()
    {
        lock (_instrumentsLock)
        {
            return _instruments.Keys.Order(StringComparer.Ordinal).ToList();
        }
    }

    private InstrumentTotals Totals(Instrument instrument)
    {
        lock (_instrumentsLock)
        {
            // Two meters may publish the same name (Kestrel and ours both host apps): one totals object adds them up.
            if (!_instruments.TryGetValue(instrument.Name, out var totals))
            {
                totals = new InstrumentTotals(this, instrument.GetType().IsGenericType && instrument.GetType().GetGenericTypeDefinition() == typeof(Histogram<>))
                {
                    IsObservable = instrument.IsObservable,
                    IsLevel = IsLevel(instrument),
                };
                _instruments.Add(instrument.Name, totals);
            }

            return totals;
        }
    }

    public void Dispose()
    {
        _levels.Dispose();
        lock (_watchLock)
        {
            _flows?.Dispose();
            _flows = null;
        }
    }

    private sealed class Watcher(MetricsAggregator owner) : IDisposable
    {
        private int _disposed;

        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) == 0)
            {
                owner.Unwatch();
            }
        }
    }

    /// <summary>Values of the grouping tags, in <see cref="GroupTags"/> order.</summary>
    /// <remarks><c>Tls</c> is the <c>tls</c> tag ("true"/"false", Proxy.Server's), or "true" when a <c>tls.protocol.version</c> is present (Kestrel's).</remarks>
    public readonly record struct TagKey(string? Cluster, string? Destination, string? ProtocolVersion, string? ErrorType, string? Tls);

    /// <summary>What one instrument name recorded: total (sum, or count for a histogram), groups, recent histogram values.</summary>
    // Written by measurement callbacks (any thread) under _lock; read by the dashboard's sampler under the same lock.
    public sealed class InstrumentTotals(MetricsAggregator owner, bool isHistogram)
    {
        private readonly Lock _lock = new();
        private readonly Dictionary<TagKey, double> _groups = [];
        private readonly (long Timestamp, double Value)[] _recent = isHistogram ? new (long, double)[HistogramCapacity] : [];
        private int _next;
        private int _count;
        private double _total;

        public bool IsHistogram { get; } = isHistogram;

        /// <summary>Reports absolute values when observed (<see cref="Observe"/>), rather than changes as they happen.</summary>
        public bool IsObservable { get; init; }

        /// <summary>A level (up-down counter or observable): read from the start, not only while watched.</summary>
        public bool IsLevel { get; init; }

        internal void Reset()
        {
            lock (_lock)
            {
                _total = 0;
                _groups.Clear();
            }
        }

        /// <summary>The sum of all measurements, or for a histogram the number of them.</summary>
        public double Total
        {
            get
            {
                lock (_lock)
                {
                    return _total;
                }
            }
        }

        internal void Record(double value, ReadOnlySpan<KeyValuePair<string, object?>> tags)
        {
            var key = Key(tags);
            var amount = IsHistogram ? 1 : value;
            lock (_lock)
            {
                _total += amount;
                if (key != default)
                {
                    _groups[key] = _groups.GetValueOrDefault(key) + amount;
                }

                if (IsHistogram && owner.Watching)
                {
                    _recent[_next] = (Stopwatch.GetTimestamp(), value);
                    _next = (_next + 1) % _recent.Length;
                    _count = Math.Min(_count + 1, _recent.Length);
                }
            }
        }

        /// <summary>Sums by one projection of the tag key (e.g. by cluster), skipping measurements without that tag.</summary>
        public Dictionary<string, double> SumBy(Func<TagKey, string?> selector)
        {
            var result = new Dictionary<string, double>(StringComparer.Ordinal);
            lock (_lock)
            {
                foreach (var (key, value) in _groups)
                {
                    if (selector(key) is { } group)
                    {
                        result[group] = result.GetValueOrDefault(group) + value;
                    }
                }
            }

            return result;
        }

        /// <summary>The <paramref name="quantiles"/> of the values recorded within <paramref name="window"/>; null when there are none.</summary>
        public double[]? Percentiles(TimeSpan window, params double[] quantiles)
        {
            var since = Stopwatch.GetTimestamp() - (long)(window.TotalSeconds * Stopwatch.Frequency);
            List<double> values;
            lock (_lock)
            {
                values = new List<double>(_count);
                for (var i = 0; i < _count; i++)
                {
                    var (timestamp, value) = _recent[i];
                    if (timestamp >= since)
                    {
                        values.Add(value);
                    }
                }
            }

            if (values.Count == 0)
            {
                return null;
            }

            values.Sort();
            // Nearest rank: the smallest value with at least q of the values at or below it.
            return quantiles.Select(q => values[Math.Clamp((int)Math.Ceiling(q * values.Count) - 1, 0, values.Count - 1)]).ToArray();
        }

        private static TagKey Key(ReadOnlySpan<KeyValuePair<string, object?>> tags)
        {
            string? cluster = null, destination = null, protocol = null, error = null, tls = null;
            foreach (var (name, value) in tags)
            {
                switch (name)
                {
                    case "proxy.cluster": cluster = value?.ToString(); break;
                    case "proxy.destination": destination = value?.ToString(); break;
                    case "network.protocol.version": protocol = value?.ToString(); break;
                    case "error.type": error = value?.ToString(); break;
                    case "tls": tls = value?.ToString(); break;
                    case "tls.protocol.version": tls ??= "true"; break;
                }
            }

            return new TagKey(cluster, destination, protocol, error, tls);
        }
    }
}
