using System.Diagnostics.Metrics;

namespace Proxy.Testing;

/// <summary>One measurement as a <see cref="MetricRecorder"/> saw it.</summary>
public sealed record RecordedMeasurement(string Instrument, double Value, IReadOnlyDictionary<string, object?> Tags)
{
    public string? Tag(string name) => Tags.TryGetValue(name, out var value) ? Convert.ToString(value, System.Globalization.CultureInfo.InvariantCulture) : null;

    public override string ToString() => $"{Instrument}={Value} {{{string.Join(", ", Tags.Select(t => $"{t.Key}={t.Value}"))}}}";
}

/// <summary>
/// Records every measurement of one meter (optionally only the meter an app's own IMeterFactory created, so parallel
/// hosts do not see each other's) and lets a test wait for the measurement it expects: the wait completes when that
/// measurement is recorded, not after a sleep. The timeout only turns a hang into a clear failure.
/// </summary>
/// <remarks>
/// Observable instruments report only when asked: <see cref="Current"/> asks once, and a wait on one asks again each
/// time a short poll interval passes without the measurement (a level the code under test reaches has no event of its
/// own). Waits on pushed instruments complete on the measurement itself.
/// </remarks>
// Shared: measurements arrive on any thread; the list and the waiters are guarded by one lock.
public sealed class MetricRecorder : IDisposable
{
    private static readonly TimeSpan PollInterval = TimeSpan.FromMilliseconds(20);

    private readonly MeterListener _listener = new();
    private readonly Lock _lock = new();
    // One observation at a time, so Current reads only what its own observation recorded.
    private readonly Lock _observeLock = new();
    private readonly List<RecordedMeasurement> _measurements = [];
    private readonly HashSet<string> _observable = [];
    private readonly List<(Func<RecordedMeasurement, bool> Match, TaskCompletionSource<RecordedMeasurement> Done)> _waiters = [];

    /// <param name="meterName">The meter to record ("Proxy.Server", "Proxy.Forwarding").</param>
    /// <param name="scope">The app's IMeterFactory (meters it creates carry it as their scope), or null for any meter of that name.</param>
    public MetricRecorder(string meterName, object? scope = null)
    {
        _listener.InstrumentPublished = (instrument, listener) =>
        {
            if (instrument.Meter.Name == meterName && (scope is null || ReferenceEquals(instrument.Meter.Scope, scope)))
            {
                if (instrument.IsObservable)
                {
                    lock (_lock)
                    {
                        _observable.Add(instrument.Name);
                    }
                }

                listener.EnableMeasurementEvents(instrument);
            }
        };
        _listener.SetMeasurementEventCallback<long>((i, v, t, _) => Record(i, v, t));
        _listener.SetMeasurementEventCallback<int>((i, v, t, _) => Record(i, v, t));
        _listener.SetMeasurementEventCallback<double>((i, v, t, _) => Record(i, v, t));
        _listener.Start();
    }

    public IReadOnlyList<RecordedMeasurement> Snapshot()
    {
        lock (_lock)
        {
            return _measurements.ToArray();
        }
    }

    /// <summary>The measurements of <paramref name="instrument"/> so far.</summary>
    public IReadOnlyList<RecordedMeasurement> Of(string instrument) => Snapshot().Where(m => m.Instrument == instrument).ToArray();

    /// <summary>Sum of <paramref name="instrument"/>'s measurements that match (an UpDownCounter's current value).</summary>
    public double Sum(string instrument, Func<RecordedMeasurement, bool>? match = null) => Of(instrument).Where(m => match?.Invoke(m) ?? true).Sum(m => m.Value);

    /// <summary>
    /// What an observable instrument reports now: its callbacks are run and the values they give for the tags that
    /// match are summed. Null when it reported nothing that matches (not published, or no such tags yet).
    /// </summary>
    public double? Current(string instrument, Func<RecordedMeasurement, bool>? match = null)
    {
        RecordedMeasurement[] observed;
        lock (_observeLock)
        {
            int from;
            lock (_lock)
            {
                from = _measurements.Count;
            }

            _listener.RecordObservableInstruments(); // the callbacks run here, on this thread
            lock (_lock)
            {
                observed = _measurements.Skip(from).Where(m => m.Instrument == instrument && (match?.Invoke(m) ?? true)).ToArray();
            }
        }

        return observed.Length == 0 ? null : observed.Sum(m => m.Value);
    }

    /// <summary>Completes when <see cref="Current"/> of <paramref name="instrument"/> satisfies <paramref name="condition"/>.</summary>
    public async Task<double> WaitForCurrentAsync(string instrument, Func<double, bool> condition, Func<RecordedMeasurement, bool>? match = null,
        TimeSpan? timeout = null)
    {
        var deadline = DateTime.UtcNow + (timeout ?? TimeSpan.FromSeconds(20));
        while (true)
        {
            var value = Current(instrument, match);
            if (value is { } v && condition(v))
            {
                return v;
            }

            if (DateTime.UtcNow > deadline)
            {
                throw new Xunit.Sdk.XunitException($"'{instrument}' reports {value?.ToString() ?? "nothing"}, which does not meet the condition.");
            }

            await Task.Delay(PollInterval);
        }
    }

    /// <summary>Completes with the first measurement of <paramref name="instrument"/> that matches, already recorded or still to come.</summary>
    public Task<RecordedMeasurement> WaitAsync(string instrument, Func<RecordedMeasurement, bool>? match = null, TimeSpan? timeout = null)
    {
        bool Matches(RecordedMeasurement m) => m.Instrument == instrument && (match?.Invoke(m) ?? true);
        var done = new TaskCompletionSource<RecordedMeasurement>(TaskCreationOptions.RunContinuationsAsynchronously);
        lock (_lock)
        {
            var seen = _measurements.FirstOrDefault(Matches);
            if (seen is not null)
            {
                return Task.FromResult(seen);
            }
            _waiters.Add((Matches, done));
        }
        return WithTimeout(done.Task, instrument, timeout ?? TimeSpan.FromSeconds(20));
    }

    private async Task<RecordedMeasurement> WithTimeout(Task<RecordedMeasurement> task, string instrument, TimeSpan timeout)
    {
        bool observable;
        lock (_lock)
        {
            observable = _observable.Contains(instrument);
        }

        try
        {
            if (!observable)
            {
                return await task.WaitAsync(timeout); // pushed measurements complete the wait themselves
            }

            var deadline = DateTime.UtcNow + timeout;
            while (!task.IsCompleted && DateTime.UtcNow < deadline)
            {
                // An observable instrument's measurement comes only when asked.
                lock (_observeLock)
                {
                    _listener.RecordObservableInstruments();
                }

                await Task.WhenAny(task, Task.Delay(PollInterval));
            }

            return await task.WaitAsync(TimeSpan.Zero);
        }
        catch (TimeoutException)
        {
            throw new Xunit.Sdk.XunitException($"No matching '{instrument}' measurement within {timeout}. Recorded:\n"
                + string.Join("\n", Snapshot()));
        }
    }

    private void Record<T>(Instrument instrument, T value, ReadOnlySpan<KeyValuePair<string, object?>> tags) where T : struct
    {
        var dictionary = new Dictionary<string, object?>();
        foreach (var tag in tags)
        {
            dictionary[tag.Key] = tag.Value;
        }
        var measurement = new RecordedMeasurement(instrument.Name, Convert.ToDouble(value, System.Globalization.CultureInfo.InvariantCulture), dictionary);
        List<TaskCompletionSource<RecordedMeasurement>>? completed = null;
        lock (_lock)
        {
            _measurements.Add(measurement);
            for (var i = _waiters.Count - 1; i >= 0; i--)
            {
                if (_waiters[i].Match(measurement))
                {
                    (completed ??= []).Add(_waiters[i].Done);
                    _waiters.RemoveAt(i);
                }
            }
        }
        completed?.ForEach(c => c.TrySetResult(measurement));
    }

    public void Dispose() => _listener.Dispose();
}
