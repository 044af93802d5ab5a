using Proxy.Relay;

namespace Proxy.FunctionalTests.Relay;

/// <summary>A destination's idle HTTP/1.1 connections are kept per epoll thread: the asking thread's own go first.</summary>
public class LoopStacksTests
{
    [Fact]
    public void TryPop_OwnLoopsItemsFirst_ThenAnyOther_ThenNone()
    {
        var stacks = new LoopStacks<string>(2);
        stacks.Push("loop0-old", 0);
        stacks.Push("loop1", 1);
        stacks.Push("loop0-new", 0);
        stacks.Push("no-loop", -1);

        Assert.True(stacks.TryPop(0, out var first));
        Assert.Equal("loop0-new", first); // the most recently idle of its own thread
        Assert.True(stacks.TryPop(0, out var second));
        Assert.Equal("loop0-old", second);
        Assert.True(stacks.TryPop(0, out var third)); // none of its own left: another thread's (or none's) is better than a new one
        Assert.True(stacks.TryPop(0, out var fourth));
        Assert.Equal(["loop1", "no-loop"], new[] { third!, fourth! }.Order());
        Assert.True(stacks.IsEmpty);
        Assert.False(stacks.TryPop(1, out _));
    }

    [Fact]
    public void MoreEpollThreadsThanSlots_ItemsStillCome_Back()
    {
        var stacks = new LoopStacks<string>(1);
        stacks.Push("loop5", 5);
        stacks.Push("loop2", 2);

        Assert.False(stacks.IsEmpty);
        Assert.True(stacks.TryPop(5, out var a));
        Assert.True(stacks.TryPop(-1, out var b));
        Assert.Equal(["loop2", "loop5"], new[] { a!, b! }.Order());
        Assert.True(stacks.IsEmpty);
    }
}
