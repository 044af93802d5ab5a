using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class SendWindowsTests
{
    private const int Default = SendWindows.DefaultWindow;

    private readonly List<int> _turns = [];
    private readonly StreamScheduler _scheduler;
    private readonly StallRecorder _metrics = new();
    private readonly ManualTime _time = new();
    private readonly SendWindows _windows;

    public SendWindowsTests()
    {
        _scheduler = new StreamScheduler(stream =>
        {
            _turns.Add(stream.StreamId);
            return false;
        });
        _windows = new SendWindows(_scheduler, _time, _metrics);
    }

    /// <summary>The streams the windows handed back to the scheduler, in order (one pass).</summary>
    private List<int> Rescheduled()
    {
        _turns.Clear();
        _scheduler.ServicePass();
        return [.. _turns];
    }

    private FakeOutputSource Tracked(int id)
    {
        var stream = new FakeOutputSource(id);
        _windows.Track(stream);
        return stream;
    }

    [Fact]
    public void Track_AfterInitialWindowChange_StartsAtPeersCurrentInitialWindow()
    {
        Assert.Null(_windows.ApplyInitialWindowSize(1000));

        var stream = Tracked(1);
        _windows.Track(stream); // a second Track keeps the window

        Assert.Equal(1000, stream.Send.SendWindow);
        Assert.Equal(1000, _windows.PeerInitialWindow);
        Assert.Equal(Default, _windows.ConnectionWindow);
    }

    [Fact]
    public void Allowance_SmallestOfStreamConnectionAndAvailable()
    {
        var stream = Tracked(1);
        Assert.Equal(100, _windows.Allowance(stream, 100));

        Assert.Null(_windows.ApplyInitialWindowSize(10));
        Assert.Equal(10, _windows.Allowance(stream, 100));

        Assert.Null(_windows.ApplyWindowUpdate(stream, Default));
        _windows.Debit(stream, Default - 5); // the connection window is now 5
        Assert.Equal(5, _windows.ConnectionWindow);
        Assert.Equal(5, _windows.Allowance(stream, 100));
    }

    [Fact]
    public void Debit_ShrinksStreamAndConnectionWindows()
    {
        var a = Tracked(1);
        var b = Tracked(3);

        _windows.Debit(a, 1000);
        _windows.Debit(b, 24);

        Assert.Equal(Default - 1000, a.Send.SendWindow);
        Assert.Equal(Default - 24, b.Send.SendWindow);
        Assert.Equal(Default - 1024, _windows.ConnectionWindow);
    }

    [Fact]
    public void ApplyInitialWindowSize_Decrease_StreamWindowGoesNegative()
    {
        var stream = Tracked(1);
        _windows.Debit(stream, 60_000);

        Assert.Null(_windows.ApplyInitialWindowSize(1000));

        // RFC 9113 §6.9.2: 5,535 left, minus the 64,535 decrease.
        Assert.Equal(-59_000, stream.Send.SendWindow);
        Assert.True(_windows.Allowance(stream, 100) < 0);
        _windows.WaitForWindow(stream);
        Assert.True(stream.Send.BlockedOnStreamWindow);

        // Credit that leaves the window at 0 does not wake the stream; the next octet does.
        Assert.Null(_windows.ApplyWindowUpdate(stream, 59_000));
        Assert.Empty(Rescheduled());
        Assert.Null(_windows.ApplyWindowUpdate(stream, 1));
        Assert.Equal([1], Rescheduled());
        Assert.Equal(1, stream.Send.SendWindow);
    }

    [Fact]
    public void ApplyInitialWindowSize_IncreaseUnblocksStream_Rescheduled()
    {
        var blocked = Tracked(1);
        var idle = Tracked(3);
        _windows.Debit(blocked, Default);
        _windows.WaitForWindow(blocked);

        Assert.Null(_windows.ApplyInitialWindowSize(Default + 10));

        Assert.Equal([1], Rescheduled());
        Assert.False(blocked.Send.BlockedOnStreamWindow);
        Assert.Equal(10, blocked.Send.SendWindow);
        Assert.Equal(Default + 10, idle.Send.SendWindow);
    }

    [Fact]
    public void ApplyInitialWindowSize_StreamWindowPast2To31Minus1_FlowControlConnectionError()
    {
        var stream = Tracked(1);
        Assert.Null(_windows.ApplyWindowUpdate(stream, int.MaxValue - Default)); // exactly 2^31-1 is allowed
        Assert.Equal(int.MaxValue, stream.Send.SendWindow);

        var error = _windows.ApplyInitialWindowSize(Default + 1);

        var connectionError = Assert.IsType<Http2ConnectionException>(error);
        Assert.Equal(Http2ErrorCode.FlowControlError, connectionError.ErrorCode);
        Assert.Equal("initial_window_overflow", connectionError.Token);
    }

    [Fact]
    public void ApplyWindowUpdate_ConnectionPast2To31Minus1_FlowControlConnectionError()
    {
        Assert.Null(_windows.ApplyWindowUpdate(null, int.MaxValue - Default));
        Assert.Equal(int.MaxValue, _windows.ConnectionWindow);

        var error = _windows.ApplyWindowUpdate(null, 1);

        var connectionError = Assert.IsType<Http2ConnectionException>(error);
        Assert.Equal(Http2ErrorCode.FlowControlError, connectionError.ErrorCode);
        Assert.Equal("connection_window_overflow", connectionError.Token);
    }

    [Fact]
    public void ApplyWindowUpdate_StreamPast2To31Minus1_FlowControlStreamError()
    {
        var stream = Tracked(5);
        Assert.Null(_windows.ApplyWindowUpdate(stream, int.MaxValue - Default));

        var error = _windows.ApplyWindowUpdate(stream, 1);

        var streamError = Assert.IsType<Http2StreamException>(error);
        Assert.Equal(5, streamError.StreamId);
        Assert.Equal(Http2ErrorCode.FlowControlError, streamError.ErrorCode);
        Assert.Equal("stream_window_overflow", streamError.Token);
    }

    [Fact]
    public void ApplyWindowUpdate_StreamWindowItWaitsFor_Rescheduled()
    {
        var stream = Tracked(1);
        _windows.Debit(stream, Default);
        _windows.WaitForWindow(stream);
        Assert.True(stream.Send.BlockedOnStreamWindow);

        // Connection credit does not help a stream out of stream window.
        Assert.Null(_windows.ApplyWindowUpdate(null, 1000));
        Assert.Empty(Rescheduled());

        Assert.Null(_windows.ApplyWindowUpdate(stream, 100));
        Assert.Equal([1], Rescheduled());
        Assert.False(stream.Send.BlockedOnStreamWindow);
        Assert.Equal(100, _windows.Allowance(stream, 16_384));
    }

    [Fact]
    public void ApplyWindowUpdate_ConnectionWindowTheyWaitFor_AllBlockedRescheduledInOrder()
    {
        var first = Tracked(1);
        var second = Tracked(3);
        Assert.Null(_windows.ApplyWindowUpdate(first, Default));
        _windows.Debit(first, Default); // the connection window is spent; both streams still have stream window
        _windows.WaitForWindow(second);
        _windows.WaitForWindow(first);
        _windows.WaitForWindow(second); // listed once
        Assert.True(first.Send.InConnectionBlockedList);
        Assert.False(first.Send.BlockedOnStreamWindow);

        // Stream credit does not help a stream out of connection window.
        Assert.Null(_windows.ApplyWindowUpdate(first, 10));
        Assert.Empty(Rescheduled());

        Assert.Null(_windows.ApplyWindowUpdate(null, 500));
        Assert.Equal([3, 1], Rescheduled());
        Assert.False(first.Send.InConnectionBlockedList);

        // The list was emptied: the next raise schedules nobody.
        Assert.Null(_windows.ApplyWindowUpdate(null, 500));
        Assert.Empty(Rescheduled());
    }

    [Fact]
    public void Release_ConnectionBlockedStream_NotRescheduledAndNoLongerTracked()
    {
        var released = Tracked(1);
        var waiting = Tracked(3);
        Assert.Null(_windows.ApplyWindowUpdate(released, Default));
        _windows.Debit(released, Default);
        _windows.WaitForWindow(released);
        _windows.WaitForWindow(waiting);

        _windows.Release(released);
        released.Send.OutputStopped = true;

        Assert.False(released.Send.InConnectionBlockedList);
        Assert.Null(_windows.ApplyWindowUpdate(null, 100));
        Assert.Equal([3], Rescheduled());
        Assert.Equal(new IHttp2OutputSource[] { waiting }, _windows.ReleaseAll());
        Assert.Empty(_windows.ReleaseAll());
    }

    [Fact]
    public void ApplyWindowUpdate_StoppedStreamNeverTracked_Ignored()
    {
        var closed = new FakeOutputSource(1);
        closed.Send.OutputStopped = true;

        Assert.Null(_windows.ApplyWindowUpdate(closed, int.MaxValue));

        Assert.False(closed.Send.SendWindowInitialized);
        Assert.Equal(0, closed.Send.SendWindow);
        Assert.Empty(_windows.ReleaseAll());
    }

    [Fact]
    public void ApplyWindowUpdate_StoppedTrackedStream_StillCheckedForOverflowButNotRescheduled()
    {
        var stream = Tracked(1);
        _windows.Debit(stream, Default);
        _windows.WaitForWindow(stream);
        stream.Send.OutputStopped = true;

        Assert.Null(_windows.ApplyWindowUpdate(stream, 10));
        Assert.Empty(Rescheduled());
        Assert.Equal(10, stream.Send.SendWindow);
        Assert.IsType<Http2StreamException>(_windows.ApplyWindowUpdate(stream, int.MaxValue));
    }

    [Fact]
    public void WaitForWindowThenDebit_StallListened_OneStallOfTheWaitedTime()
    {
        var stream = Tracked(1);
        _windows.Debit(stream, Default);
        _windows.WaitForWindow(stream);
        _time.Advance(TimeSpan.FromMilliseconds(40));
        _windows.WaitForWindow(stream); // still the same stall
        _time.Advance(TimeSpan.FromMilliseconds(2));
        Assert.Null(_windows.ApplyWindowUpdate(stream, 100));

        _windows.Debit(stream, 50);
        _windows.Debit(stream, 50);

        Assert.Equal([TimeSpan.FromMilliseconds(42)], _metrics.Stalls);
    }

    [Fact]
    public void Release_WhileStalled_StallEnds()
    {
        var stream = Tracked(1);
        _windows.Debit(stream, Default);
        _windows.WaitForWindow(stream);
        _time.Advance(TimeSpan.FromMilliseconds(7));

        _windows.Release(stream);

        Assert.Equal([TimeSpan.FromMilliseconds(7)], _metrics.Stalls);
        Assert.Equal(0, stream.Send.StallStart);
    }

    [Fact]
    public void WaitForWindow_NoStallListener_NotTimed()
    {
        _metrics.StallEnabled = false;
        var stream = Tracked(1);
        _windows.Debit(stream, Default);
        _windows.WaitForWindow(stream);
        _time.Advance(TimeSpan.FromMilliseconds(7));
        _windows.Debit(stream, 0);

        Assert.Equal(0, stream.Send.StallStart);
        Assert.Empty(_metrics.Stalls);
    }

    /// <summary>Timestamps that move only when a test says so (never 0: the windows read 0 as "not stalled").</summary>
    private sealed class ManualTime : TimeProvider
    {
        private long _now = 1_000_000;

        public override long TimestampFrequency => TimeSpan.TicksPerSecond;

        public override long GetTimestamp() => _now;

        public void Advance(TimeSpan by) => _now += by.Ticks;
    }

    private sealed class StallRecorder : IProtocolMetrics
    {
        public bool StallEnabled { get; set; } = true;
        public List<TimeSpan> Stalls { get; } = [];

        public bool FlowControlStallEnabled => StallEnabled;
        public void FlowControlStalled(TimeSpan duration) => Stalls.Add(duration);
        public bool StreamStarted() => true;
        public void StreamEnded() { }
        public void StreamReset(bool sent, Http2ErrorCode code) { }
        public void StreamRefused() { }
        public void GoAway(bool sent, Http2ErrorCode code) { }
        public bool WriterBatchEnabled => false;
        public void WriterBatch(int frames, long bytes) { }
    }
}
