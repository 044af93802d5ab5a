using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Threading.Channels;

namespace Proxy.Load.Server;

/// <summary>
/// Emits one event every 1/rate seconds (or every <c>interval</c>) to every subscribed stream: <c>data: &lt;unix-ns&gt; &lt;seq&gt;\n\n</c>,
/// formatted once per event and shared by all subscribers (a broadcast, not a per-stream timer).
/// </summary>
// Owned by the server: the tick loop writes, subscribers (one per /sse request) read their own channel.
public sealed class SseBroadcaster : IAsyncDisposable
{
    private readonly ConcurrentDictionary<Channel<byte[]>, byte> _subscribers = new();
    private readonly CancellationTokenSource _stop = new();
    private readonly Task _loop;

    public SseBroadcaster(int rate)
        : this(TimeSpan.FromSeconds(1.0 / CheckRate(rate)))
    {
    }

    public SseBroadcaster(TimeSpan interval)
    {
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(interval, TimeSpan.Zero);
        Interval = interval;
        _loop = Task.Run(TickLoopAsync);
    }

    /// <summary>Time between two events.</summary>
    public TimeSpan Interval { get; }

    private static int CheckRate(int rate)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(rate, 1);
        return rate;
    }

    public int SubscriberCount => _subscribers.Count;

    /// <summary>A channel that receives every event from now on; dispose the subscription to leave.</summary>
    public Subscription Subscribe()
    {
        // Unbounded: a slow client costs memory, never a lost event (losses are what the scenario measures).
        var channel = Channel.CreateUnbounded<byte[]>(new UnboundedChannelOptions { SingleReader = true, SingleWriter = true });
        _subscribers.TryAdd(channel, 0);
        return new Subscription(this, channel);
    }

    private async Task TickLoopAsync()
    {
        // Schedule against a fixed origin so timer jitter does not accumulate into a lower rate;
        // when late (a slow tick), the next event goes out at once.
        var interval = Stopwatch.Frequency * Interval.TotalSeconds;
        var origin = Stopwatch.GetTimestamp();
        long seq = 0;
        var token = _stop.Token;
        while (!token.IsCancellationRequested)
        {
            seq++;
            var due = origin + (long)(seq * interval);
            var wait = Stopwatch.GetElapsedTime(Stopwatch.GetTimestamp(), due);
            if (wait > TimeSpan.Zero)
            {
                try
                {
                    await Task.Delay(wait, token);
                }
                catch (OperationCanceledException)
                {
                    return;
                }
            }

            var unixNs = (DateTime.UtcNow.Ticks - DateTime.UnixEpoch.Ticks) * 100;
            var payload = Encoding.ASCII.GetBytes(string.Create(CultureInfo.InvariantCulture, $"data: {unixNs} {seq}\n\n"));
            foreach (var channel in _subscribers.Keys)
            {
                channel.Writer.TryWrite(payload);
            }
        }
    }

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        await _loop;
        _stop.Dispose();
    }

    /// <summary>One stream's view of the broadcast.</summary>
    // Owned by the /sse request that subscribed.
    public sealed class Subscription(SseBroadcaster owner, Channel<byte[]> channel) : IDisposable
    {
        public ChannelReader<byte[]> Events => channel.Reader;

        public void Dispose() => owner._subscribers.TryRemove(channel, out _);
    }
}
