namespace Proxy.Forwarding.Health;

/// <summary>
/// Requests and transport failures of one destination over a sliding window, in a fixed number
/// of time buckets: memory stays constant whatever the request rate. NOTE: a bucket is dropped
/// whole, so the window effectively covers between <c>window - window/Buckets</c> and
/// <c>window</c>; that coarseness is the price of not keeping a timestamp per request.
/// </summary>
// Shared by every request to the destination; all state is guarded by _lock (a few adds per request).
internal sealed class FailureRateWindow
{
    /// <summary>Buckets per window: 10 gives 6 s granularity for the default 60 s window.</summary>
    public const int Buckets = 10;

    private readonly Lock _lock = new();
    private readonly long[] _epochs = new long[Buckets];
    private readonly int[] _totals = new int[Buckets];
    private readonly int[] _failures = new int[Buckets];

    /// <summary>Records one completed request at <paramref name="timestamp"/> and returns the window's counts after it.</summary>
    public (int Total, int Failures) Record(long timestamp, long bucketTicks, bool failed)
    {
        var epoch = timestamp / bucketTicks;
        var slot = (int)(epoch % Buckets);
        lock (_lock)
        {
            if (_epochs[slot] != epoch)
            {
                // The slot last held a bucket at least one window old: reuse it.
                _epochs[slot] = epoch;
                _totals[slot] = 0;
                _failures[slot] = 0;
            }

            _totals[slot]++;
            if (failed)
            {
                _failures[slot]++;
            }

            return SumLocked(epoch);
        }
    }

    /// <summary>The counts within the window ending at <paramref name="timestamp"/>.</summary>
    public (int Total, int Failures) Counts(long timestamp, long bucketTicks)
    {
        lock (_lock)
        {
            return SumLocked(timestamp / bucketTicks);
        }
    }

    /// <summary>Forgets everything: a destination that was sat out starts afresh.</summary>
    public void Reset()
    {
        lock (_lock)
        {
            Array.Clear(_epochs);
            Array.Clear(_totals);
            Array.Clear(_failures);
        }
    }

    private (int Total, int Failures) SumLocked(long currentEpoch)
    {
        int total = 0, failures = 0;
        for (var i = 0; i < Buckets; i++)
        {
            // Slots older than the window (or never used: total 0) count nothing.
            if (_epochs[i] > currentEpoch - Buckets && _epochs[i] <= currentEpoch && _totals[i] > 0)
            {
                total += _totals[i];
                failures += _failures[i];
            }
        }

        return (total, failures);
    }
}
