using Microsoft.Extensions.Time.Testing;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>Connection timeouts on virtual time: each kind keeps its own deadline and none is lost.</summary>
public class Http2TimeoutTests
{
    private static readonly TimeSpan Bounded = TimeSpan.FromSeconds(20); // a hang guard, not a speed claim

    [Fact]
    public async Task KeepAlive_TimerFiresEarly_ReArmedAndConnectionClosed()
    {
        var fake = new TimerCountingTimeProvider();
        var time = new EarlyTimeProvider(fake, TimeSpan.FromMilliseconds(1));
        var options = new Http2Options { KeepAliveTimeout = TimeSpan.FromSeconds(130) };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options, time);
        await peer.HandshakeAsync();
        await Http2AbuseTests.WaitForArmedTimerAsync(fake);

        // The timer fires 1 ms before the deadline: the engine must re-arm for the rest, not drop the timeout.
        fake.Advance(TimeSpan.FromSeconds(130) - TimeSpan.FromMilliseconds(1));
        await Http2AbuseTests.WaitForArmedTimerAsync(fake);
        fake.Advance(TimeSpan.FromSeconds(1));

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.NoError);
    }

    [Fact]
    public async Task Shutdown_HeaderBlockDuringPingPhase_FinalGoAwayStillSentOnPingTimeout()
    {
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { KeepAliveTimeout = Timeout.InfiniteTimeSpan };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options, time);
        await peer.HandshakeAsync();
        var shutdown = peer.Connection.ShutdownAsync();
        Assert.Equal(int.MaxValue, await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError));
        await peer.ExpectPingAsync(ack: false); // never answered

        // A header block in phase one arms the header-block timeout; it must not replace the PING timeout.
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders());
        await peer.SendHeaderBlockAsync(1, block[..2], endStream: true, endHeaders: false);
        await peer.SendContinuationAsync(1, block[2..], endHeaders: true);
        await peer.ReadResponseAsync(1);
        await Http2AbuseTests.WaitForArmedTimerAsync(time);
        time.Advance(TimeSpan.FromSeconds(2));

        Assert.Equal(1, await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError));
        await peer.ExpectConnectionClosedAsync();
        await shutdown.WaitAsync(Bounded);
    }

    [Fact]
    public async Task Shutdown_HandlerNeverFinishes_AbortedAfterDrainTimeout()
    {
        var time = new TimerCountingTimeProvider();
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { KeepAliveTimeout = Timeout.InfiniteTimeSpan, ShutdownDrainTimeout = TimeSpan.FromSeconds(10) };
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            started.SetResult();
            return Task.Delay(Timeout.Infinite, exchange.RequestAborted);
        }, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await started.Task.WaitAsync(Bounded);
        var shutdown = peer.Connection.ShutdownAsync();
        await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError);
        var ping = await peer.ExpectPingAsync(ack: false);
        await peer.SendPingAsync(ping.OpaqueData, ack: true);
        Assert.Equal(1, await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError));
        await Http2AbuseTests.WaitForArmedTimerAsync(time); // the drain deadline

        time.Advance(TimeSpan.FromSeconds(11));

        await shutdown.WaitAsync(Bounded);
        await peer.ExpectConnectionClosedAsync();
    }

    /// <summary>Wraps a <see cref="FakeTimeProvider"/>; its timers fire <c>early</c> before their due time, as real timers may.</summary>
    private sealed class EarlyTimeProvider(FakeTimeProvider inner, TimeSpan early) : TimeProvider
    {
        public override DateTimeOffset GetUtcNow() => inner.GetUtcNow();
        public override long GetTimestamp() => inner.GetTimestamp();
        public override long TimestampFrequency => inner.TimestampFrequency;

        public override ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period)
            => new EarlyTimer(inner.CreateTimer(callback, state, Early(dueTime), period), early);

        private TimeSpan Early(TimeSpan due) => Shift(due, early);

        private static TimeSpan Shift(TimeSpan due, TimeSpan early)
            => due == Timeout.InfiniteTimeSpan ? due : due > early ? due - early : TimeSpan.Zero;

        private sealed class EarlyTimer(ITimer timer, TimeSpan early) : ITimer
        {
            public bool Change(TimeSpan dueTime, TimeSpan period) => timer.Change(Shift(dueTime, early), period);
            public void Dispose() => timer.Dispose();
            public ValueTask DisposeAsync() => timer.DisposeAsync();
        }
    }
}
