using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class StreamSchedulerTests
{
    /// <summary>A scheduler whose turns are recorded; a stream with turns left in <paramref name="moreTurns"/> asks for another.</summary>
    private static StreamScheduler Recording(List<int> turns, Dictionary<IHttp2OutputSource, int>? moreTurns = null)
        => new(stream =>
        {
            turns.Add(stream.StreamId);
            if (moreTurns is not null && moreTurns.TryGetValue(stream, out var left) && left > 0)
            {
                moreTurns[stream] = left - 1;
                return true;
            }
            return false;
        });

    [Fact]
    public void ServicePass_BusyStream_GoesToTheBackAfterEachTurn()
    {
        var turns = new List<int>();
        var (a, b, c) = (new FakeOutputSource(1), new FakeOutputSource(3), new FakeOutputSource(5));
        var scheduler = Recording(turns, new() { [a] = 2 });
        scheduler.Schedule(a);
        scheduler.Schedule(b);
        scheduler.Schedule(c);

        scheduler.ServicePass();
        Assert.Equal([1, 3, 5], turns);
        Assert.True(scheduler.HasReady);
        Assert.True(a.Send.InReadyQueue);
        Assert.False(b.Send.InReadyQueue);

        scheduler.ServicePass();
        scheduler.ServicePass();
        Assert.Equal([1, 3, 5, 1, 1], turns);
        Assert.False(scheduler.HasReady);
        Assert.False(a.Send.InReadyQueue);
    }

    [Fact]
    public void ServicePass_StreamScheduledDuringPass_WaitsForTheNextPass()
    {
        var turns = new List<int>();
        var late = new FakeOutputSource(7);
        StreamScheduler? scheduler = null;
        scheduler = new StreamScheduler(stream =>
        {
            turns.Add(stream.StreamId);
            if (stream.StreamId == 1)
            {
                scheduler!.Schedule(late);
            }
            return false;
        });
        scheduler.Schedule(new FakeOutputSource(1));
        scheduler.Schedule(new FakeOutputSource(3));

        scheduler.ServicePass();
        Assert.Equal([1, 3], turns);

        scheduler.ServicePass();
        Assert.Equal([1, 3, 7], turns);
    }

    [Fact]
    public void Schedule_Twice_OneTurn()
    {
        var turns = new List<int>();
        var scheduler = Recording(turns);
        var stream = new FakeOutputSource(1);

        scheduler.Schedule(stream);
        scheduler.Schedule(stream);
        scheduler.ServicePass();
        scheduler.ServicePass();

        Assert.Equal([1], turns);
    }

    [Fact]
    public void Schedule_OutputStopped_NotQueued()
    {
        var turns = new List<int>();
        var scheduler = Recording(turns);
        var stream = new FakeOutputSource(1);
        stream.Send.OutputStopped = true;

        scheduler.Schedule(stream);

        Assert.False(scheduler.HasReady);
        Assert.False(stream.Send.InReadyQueue);
    }

    [Fact]
    public void TryRemoveNext_Queued_RemovedInOrderWithoutATurn()
    {
        var turns = new List<int>();
        var scheduler = Recording(turns);
        var (a, b) = (new FakeOutputSource(1), new FakeOutputSource(3));
        scheduler.Schedule(a);
        scheduler.Schedule(b);

        Assert.True(scheduler.TryRemoveNext(out var first));
        Assert.True(scheduler.TryRemoveNext(out var second));
        Assert.False(scheduler.TryRemoveNext(out _));

        Assert.Same(a, first);
        Assert.Same(b, second);
        Assert.False(a.Send.InReadyQueue);
        Assert.Empty(turns);
    }
}
