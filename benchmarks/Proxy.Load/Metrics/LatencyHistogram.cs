using System.Numerics;

namespace Proxy.Load.Metrics;

/// <summary>
/// A log-linear histogram of non-negative values (nanoseconds here), in the spirit of HdrHistogram: values
/// below 64 are exact, above that each power of two is split into 32 linear sub-buckets, so any recorded value
/// is reported within ~3 %. Fixed size (~1,400 longs), no allocation per record. Mean and max are exact.
/// </summary>
// Owned by one worker while recording; merged into a total after the workers stopped.
public sealed class LatencyHistogram
{
    private const int SubBucketBits = 5;
    private const int SubBuckets = 1 << SubBucketBits;          // 32 per octave
    private const int ExactLimit = SubBuckets * 2;               // 64: values below are their own bucket
    private const int MaxExponent = 46;                          // 2^46 ns ~ 19.5 hours: plenty
    private const int BucketCount = ExactLimit + (MaxExponent - SubBucketBits) * SubBuckets;

    private readonly long[] _counts = new long[BucketCount];

    public long Count { get; private set; }

    public long Max { get; private set; }

    public double Sum { get; private set; }

    public double Mean => Count == 0 ? 0 : Sum / Count;

    public void Record(long value)
    {
        if (value < 0)
        {
            value = 0; // clocks of two processes can disagree by a hair; never a negative latency
        }

        _counts[IndexOf(value)]++;
        Count++;
        Sum += value;
        if (value > Max)
        {
            Max = value;
        }
    }

    public void Add(LatencyHistogram other)
    {
        for (var i = 0; i < BucketCount; i++)
        {
            _counts[i] += other._counts[i];
        }

        Count += other.Count;
        Sum += other.Sum;
        Max = Math.Max(Max, other.Max);
    }

    /// <summary>The value at <paramref name="percentile"/> (0-100): the upper edge of the bucket holding it, capped at Max.</summary>
    public long ValueAtPercentile(double percentile)
    {
        if (Count == 0)
        {
            return 0;
        }

        var rank = (long)Math.Ceiling(percentile / 100.0 * Count);
        rank = Math.Clamp(rank, 1, Count);
        long seen = 0;
        for (var i = 0; i < BucketCount; i++)
        {
            seen += _counts[i];
            if (seen >= rank)
            {
                return Math.Min(UpperEdge(i), Max);
            }
        }

        return Max;
    }

    internal static int IndexOf(long value)
    {
        if (value < ExactLimit)
        {
            return (int)value;
        }

        var exponent = BitOperations.Log2((ulong)value);             // >= 6
        if (exponent >= MaxExponent)
        {
            return BucketCount - 1;
        }

        var mantissa = (int)(value >> (exponent - SubBucketBits));    // in [32, 63]
        return ExactLimit + (exponent - SubBucketBits - 1) * SubBuckets + (mantissa - SubBuckets);
    }

    internal static long UpperEdge(int index)
    {
        if (index < ExactLimit)
        {
            return index;
        }

        var exponent = (index - ExactLimit) / SubBuckets + SubBucketBits + 1;
        var mantissa = (index - ExactLimit) % SubBuckets + SubBuckets;
        var shift = exponent - SubBucketBits;
        return ((long)(mantissa + 1) << shift) - 1;
    }
}
