using Proxy.Testing;

namespace Proxy.Protocols.Tests.Testing;

public class FakeTimeProviderTests
{
    [Fact]
    public void AdvanceBy_TimersDue_FireInDueOrder()
    {
        var time = new FakeTimeProvider();
        var fired = new List<string>();
        using var late = time.CreateTimer(_ => fired.Add("late"), null, TimeSpan.FromSeconds(3), Timeout.InfiniteTimeSpan);
        using var early = time.CreateTimer(_ => fired.Add("early"), null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);
        using var never = time.CreateTimer(_ => fired.Add("never"), null, TimeSpan.FromSeconds(10), Timeout.InfiniteTimeSpan);

        time.AdvanceBy(TimeSpan.FromSeconds(5));

        Assert.Equal(new[] { "early", "late" }, fired);
    }

    [Fact]
    public void AdvanceBy_CallbackSeesDueTime_ClockEndsAtTarget()
    {
        var time = new FakeTimeProvider();
        var start = time.GetUtcNow();
        DateTimeOffset seen = default;
        using var timer = time.CreateTimer(_ => seen = time.GetUtcNow(), null, TimeSpan.FromSeconds(2), Timeout.InfiniteTimeSpan);

        time.AdvanceBy(TimeSpan.FromSeconds(5));

        Assert.Equal(start + TimeSpan.FromSeconds(2), seen);
        Assert.Equal(start + TimeSpan.FromSeconds(5), time.GetUtcNow());
        Assert.Equal(TimeSpan.FromSeconds(5), time.GetElapsedTime(0, time.GetTimestamp()) - time.GetElapsedTime(0, start.UtcTicks));
    }

    [Fact]
    public void AdvanceBy_PeriodicTimer_FiresEachPeriod()
    {
        var time = new FakeTimeProvider();
        var count = 0;
        using var timer = time.CreateTimer(_ => count++, null, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(1));

        time.AdvanceBy(TimeSpan.FromSeconds(3.5));

        Assert.Equal(3, count);
    }

    [Fact]
    public void Dispose_ArmedTimer_NeverFires()
    {
        var time = new FakeTimeProvider();
        var fired = false;
        var timer = time.CreateTimer(_ => fired = true, null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);
        timer.Dispose();

        time.AdvanceBy(TimeSpan.FromSeconds(2));

        Assert.False(fired);
        Assert.Equal(0, time.ActiveTimerCount);
    }

    [Fact]
    public void Change_Rearm_FiresAtNewTime()
    {
        var time = new FakeTimeProvider();
        var fired = 0;
        using var timer = time.CreateTimer(_ => fired++, null, TimeSpan.FromSeconds(1), Timeout.InfiniteTimeSpan);
        timer.Change(TimeSpan.FromSeconds(5), Timeout.InfiniteTimeSpan);

        time.AdvanceBy(TimeSpan.FromSeconds(4));
        Assert.Equal(0, fired);
        time.AdvanceBy(TimeSpan.FromSeconds(1));
        Assert.Equal(1, fired);
    }

    [Fact]
    public async Task CancellationTokenSource_WithProvider_CancelsOnAdvance()
    {
        var time = new FakeTimeProvider();
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30), time);
        var delay = Task.Delay(TimeSpan.FromSeconds(10), time);

        time.AdvanceBy(TimeSpan.FromSeconds(10));
        await delay;
        Assert.False(cts.IsCancellationRequested);
        time.AdvanceBy(TimeSpan.FromSeconds(20));
        Assert.True(cts.IsCancellationRequested);
    }
}
