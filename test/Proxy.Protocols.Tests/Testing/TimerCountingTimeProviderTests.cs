using Proxy.Testing;

namespace Proxy.Protocols.Tests.Testing;

/// <summary>The armed-timer count the timeout tests wait on, over Microsoft's FakeTimeProvider.</summary>
public class TimerCountingTimeProviderTests
{
    [Fact]
    public void ActiveTimerCount_OneShot_ArmedUntilItFires()
    {
        var time = new TimerCountingTimeProvider();
        var fired = 0;
        using var timer = time.CreateTimer(_ => fired++, null, TimeSpan.FromSeconds(2), Timeout.InfiniteTimeSpan);
        Assert.Equal(1, time.ActiveTimerCount);

        time.Advance(TimeSpan.FromSeconds(1));
        Assert.Equal((0, 1), (fired, time.ActiveTimerCount));

        time.Advance(TimeSpan.FromSeconds(1));
        Assert.Equal((1, 0), (fired, time.ActiveTimerCount));
    }

    [Fact]
    public void ActiveTimerCount_ChangeToInfiniteAndDispose_NotArmed()
    {
        var time = new TimerCountingTimeProvider();
        var unarmed = time.CreateTimer(_ => { }, null, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        var stopped = time.CreateTimer(_ => { }, null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);
        var disposed = time.CreateTimer(_ => { }, null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);
        Assert.Equal(2, time.ActiveTimerCount);

        Assert.True(stopped.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan));
        disposed.Dispose();

        Assert.Equal(0, time.ActiveTimerCount);
        Assert.False(disposed.Change(TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan));
        Assert.Equal(0, time.ActiveTimerCount);
        unarmed.Dispose();
        stopped.Dispose();
    }

    [Fact]
    public void ActiveTimerCount_PeriodicStaysArmed_OneShotArmedAgainByItsCallbackCounts()
    {
        var time = new TimerCountingTimeProvider();
        var ticks = 0;
        using var periodic = time.CreateTimer(_ => ticks++, null, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(1));
        ITimer? oneShot = null;
        var fired = 0;
        oneShot = time.CreateTimer(_ =>
        {
            if (fired++ == 0)
            {
                oneShot!.Change(TimeSpan.FromSeconds(5), Timeout.InfiniteTimeSpan);
            }
        }, null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);

        time.Advance(TimeSpan.FromSeconds(3));

        Assert.Equal(3, ticks);
        Assert.Equal(1, fired);
        Assert.Equal(2, time.ActiveTimerCount); // the periodic one, and the one-shot its callback armed again
        oneShot.Dispose();
        Assert.Equal(1, time.ActiveTimerCount);
    }
}
