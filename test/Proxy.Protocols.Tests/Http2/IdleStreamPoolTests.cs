using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class IdleStreamPoolTests
{
    private static TimeSpan At(int seconds) => TimeSpan.FromSeconds(seconds);

    [Fact]
    public void TryPop_ReturnsTheLastReturnedFirst()
    {
        var pool = new IdleStreamPool<string>(4);
        pool.TryPush("a", At(1));
        pool.TryPush("b", At(2));

        Assert.True(pool.TryPop(out var first));
        Assert.True(pool.TryPop(out var second));
        Assert.False(pool.TryPop(out _));
        Assert.Equal(("b", "a"), (first, second));
        Assert.Equal(0, pool.Count);
    }

    [Fact]
    public void TryPush_Full_NotKept()
    {
        var pool = new IdleStreamPool<string>(2);
        Assert.True(pool.TryPush("a", At(1)));
        Assert.True(pool.TryPush("b", At(1)));

        Assert.False(pool.TryPush("c", At(1)));
        Assert.Equal(2, pool.Count);
        Assert.True(pool.TryPop(out var top));
        Assert.Equal("b", top);
    }

    [Fact]
    public void RemoveReturnedBefore_DropsTheLongestWaitingOnly()
    {
        var pool = new IdleStreamPool<string>(4);
        pool.TryPush("old1", At(1));
        pool.TryPush("old2", At(2));
        pool.TryPush("new", At(9));

        Assert.Equal(2, pool.RemoveReturnedBefore(At(2)));

        Assert.Equal(1, pool.Count);
        Assert.Equal(At(9), pool.OldestReturnedAt);
        Assert.True(pool.TryPop(out var left));
        Assert.Equal("new", left);
        Assert.Null(pool.OldestReturnedAt);
    }

    [Fact]
    public void PushPopAndExpiry_AcrossTheRingsEnd_KeepOrder()
    {
        var pool = new IdleStreamPool<string>(3);
        var now = 0;
        // Walk the ring's start around several times: expire from the bottom, push and pop at the top.
        for (var round = 0; round < 10; round++)
        {
            pool.TryPush($"x{round}", At(++now));
            pool.TryPush($"y{round}", At(++now));
            Assert.Equal(1, pool.RemoveReturnedBefore(At(now - 1)));
            Assert.True(pool.TryPop(out var top));
            Assert.Equal($"y{round}", top);
            Assert.Equal(0, pool.Count);
        }

        pool.TryPush("a", At(100));
        pool.TryPush("b", At(101));
        pool.TryPush("c", At(102));
        Assert.Equal(At(100), pool.OldestReturnedAt);
        pool.Clear();
        Assert.Equal(0, pool.Count);
        Assert.False(pool.TryPop(out _));
    }

    [Fact]
    public void Growth_FromAWrappedRing_KeepsAgesAndOrder()
    {
        var pool = new IdleStreamPool<string>(10);
        for (var i = 0; i < 4; i++)
        {
            pool.TryPush($"s{i}", At(i)); // fills the first ring of four
        }

        Assert.Equal(2, pool.RemoveReturnedBefore(At(1))); // the ring's start moves past s0, s1
        for (var i = 4; i < 10; i++)
        {
            Assert.True(pool.TryPush($"s{i}", At(i))); // wraps, then grows twice (8, 10) with the ring wrapped
        }

        Assert.Equal(8, pool.Count);
        Assert.False(pool.TryPush("over", At(11)) && pool.TryPush("over2", At(11)) && pool.TryPush("over3", At(11)));
        Assert.Equal(At(2), pool.OldestReturnedAt);
        var popped = new List<string>();
        while (pool.TryPop(out var item))
        {
            popped.Add(item);
        }

        Assert.Equal(["over2", "over", "s9", "s8", "s7", "s6", "s5", "s4", "s3", "s2"], popped);
    }
}
