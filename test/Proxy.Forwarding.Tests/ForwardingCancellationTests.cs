using Microsoft.Extensions.Time.Testing;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Tests;

/// <summary>One source cancelled by the activity timer, the deadline timer, the client's token and the host's stopping token; which one fired decides the outcome.</summary>
public class ForwardingCancellationTests
{
    private static readonly TimeSpan Activity = TimeSpan.FromSeconds(10);

    [Fact]
    public void ActivityTimeout_QuietPastIt_CancelsAsTimeout_ProgressPushesItBack()
    {
        var time = new FakeTimeProvider();
        using var client = new CancellationTokenSource();
        using var cancellation = new ForwardingCancellation(client.Token, Activity, deadline: null, deadlineFromClient: false, time);

        time.Advance(TimeSpan.FromSeconds(8));
        cancellation.ResetActivity();
        time.Advance(TimeSpan.FromSeconds(8)); // 16 s since the start, 8 since the last progress
        Assert.False(cancellation.Token.IsCancellationRequested);

        time.Advance(TimeSpan.FromSeconds(3));
        Assert.True(cancellation.Token.IsCancellationRequested);
        Assert.True(cancellation.TimedOut);
        Assert.False(cancellation.ClientAborted);
        Assert.False(cancellation.DeadlineExpired);
    }

    [Fact]
    public void ActivityTimeout_TurnedOff_NeverFires_AndCanBeChangedAgain()
    {
        var time = new FakeTimeProvider();
        using var cancellation = new ForwardingCancellation(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);

        Assert.True(cancellation.HasActivityTimer);
        cancellation.SetActivityTimeout(Timeout.InfiniteTimeSpan); // an SSE response
        Assert.False(cancellation.HasActivityTimer); // released for the stream's life, not only stopped
        cancellation.ResetActivity(); // progress while off arms nothing
        time.Advance(TimeSpan.FromHours(2));
        Assert.False(cancellation.Token.IsCancellationRequested);

        cancellation.SetActivityTimeout(TimeSpan.FromSeconds(5));
        Assert.True(cancellation.HasActivityTimer);
        time.Advance(TimeSpan.FromSeconds(6));
        Assert.True(cancellation.Token.IsCancellationRequested);
        Assert.True(cancellation.TimedOut);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void Deadline_Expires_TimedOutAndWhoseDeadlineItWas(bool fromClient)
    {
        var time = new FakeTimeProvider();
        using var cancellation = new ForwardingCancellation(CancellationToken.None, Timeout.InfiniteTimeSpan, TimeSpan.FromSeconds(1), fromClient, time);

        time.Advance(TimeSpan.FromMilliseconds(999));
        Assert.False(cancellation.Token.IsCancellationRequested);
        time.Advance(TimeSpan.FromMilliseconds(1));
        Assert.True(cancellation.Token.IsCancellationRequested);
        Assert.True(cancellation.DeadlineExpired);
        Assert.Equal(fromClient, cancellation.ClientDeadlineExpired);
        Assert.True(cancellation.TimedOut);
    }

    [Fact]
    public void ClientAborts_TokenCancelled_ClientAbortedNotTimeout()
    {
        var time = new FakeTimeProvider();
        using var client = new CancellationTokenSource();
        using var cancellation = new ForwardingCancellation(client.Token, Activity, TimeSpan.FromMinutes(1), deadlineFromClient: false, time);

        client.Cancel();
        Assert.True(cancellation.Token.IsCancellationRequested);
        Assert.True(cancellation.ClientAborted);
        Assert.False(cancellation.TimedOut);
        Assert.False(cancellation.ShuttingDown);
    }

    [Fact]
    public void ClientAlreadyGone_CancelledFromTheStart()
    {
        using var client = new CancellationTokenSource();
        client.Cancel();
        using var cancellation = new ForwardingCancellation(client.Token, Activity, deadline: null, deadlineFromClient: false, new FakeTimeProvider());
        Assert.True(cancellation.Token.IsCancellationRequested);
        Assert.True(cancellation.ClientAborted);
    }

    [Fact]
    public void NothingConfigured_TokenIsTheClients_ShutdownStillEndsIt()
    {
        using var client = new CancellationTokenSource();
        using var stopping = new CancellationTokenSource();
        using var cancellation = new ForwardingCancellation(client.Token, Timeout.InfiniteTimeSpan, deadline: null, deadlineFromClient: false, new FakeTimeProvider());
        Assert.Equal(client.Token, cancellation.Token);

        cancellation.EndOnShutdown(stopping.Token);
        var token = cancellation.Token;
        Assert.NotEqual(client.Token, token);
        stopping.Cancel();
        Assert.True(token.IsCancellationRequested);
        Assert.True(cancellation.ShuttingDown);
        Assert.False(cancellation.ClientAborted);
        Assert.False(cancellation.TimedOut);
    }

    [Fact]
    public void Disposed_TimersAndTokensFiringLater_ThrowNothing()
    {
        var time = new FakeTimeProvider();
        using var client = new CancellationTokenSource();
        using var stopping = new CancellationTokenSource();
        var cancellation = new ForwardingCancellation(client.Token, Activity, TimeSpan.FromSeconds(20), deadlineFromClient: false, time);
        cancellation.EndOnShutdown(stopping.Token);
        cancellation.Dispose();

        time.Advance(TimeSpan.FromMinutes(1));
        client.Cancel();
        stopping.Cancel();
        Assert.False(cancellation.DeadlineExpired); // its timer was disposed with it
    }

    // Rent: ended exchanges are kept per thread and reused; these run on one thread from Rent to Dispose.

    [Fact]
    public void Rented_EndedQuietly_NextRentReusesIt_ResetAndArmedForTheNewExchange()
    {
        var time = new FakeTimeProvider();
        using var client = new CancellationTokenSource();
        var first = ForwardingCancellation.Rent(client.Token, Activity, deadline: null, deadlineFromClient: false, time);
        var staleToken = first.Token;
        var staleCallbackRan = false;
        using (staleToken.Register(() => staleCallbackRan = true)) // a registration the ended exchange left behind
        {
            first.Dispose();

            using var client2 = new CancellationTokenSource();
            var second = ForwardingCancellation.Rent(client2.Token, Activity, deadline: null, deadlineFromClient: false, time);
            Assert.Same(first, second);
            Assert.False(second.Token.IsCancellationRequested);

            // The first exchange's client leaving means nothing to the second.
            client.Cancel();
            Assert.False(second.Token.IsCancellationRequested);

            // The second's own activity timeout counts from its start.
            time.Advance(TimeSpan.FromSeconds(9));
            Assert.False(second.Token.IsCancellationRequested);
            time.Advance(TimeSpan.FromSeconds(2));
            Assert.True(second.Token.IsCancellationRequested);
            Assert.True(second.TimedOut);
            Assert.False(second.ClientAborted);
            Assert.False(staleCallbackRan); // the reset dropped it
            second.Dispose();
        }

        // Expired: not pooled again.
        var third = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        Assert.NotSame(first, third);
        third.Dispose();
    }

    [Fact]
    public void Rented_TimerComesDueAfterTheExchangeEnded_DoesNotExpireTheNextOne()
    {
        var time = new FakeTimeProvider();
        var first = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        time.Advance(TimeSpan.FromSeconds(9));
        first.Dispose(); // its timer stays armed, due in 1 s

        time.Advance(TimeSpan.FromSeconds(5)); // due in the pool: nothing to expire
        var second = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        Assert.Same(first, second);
        time.Advance(TimeSpan.FromSeconds(9));
        second.ResetActivity();
        time.Advance(TimeSpan.FromSeconds(9)); // 18 s in, 9 s quiet
        Assert.False(second.Token.IsCancellationRequested);
        time.Advance(TimeSpan.FromSeconds(1));
        Assert.True(second.Token.IsCancellationRequested);
        Assert.True(second.TimedOut);
        second.Dispose();
    }

    [Fact]
    public void Rented_ShorterTimeoutThanTheTimerWasArmedFor_ExpiresOnTime()
    {
        var time = new FakeTimeProvider();
        var first = ForwardingCancellation.Rent(CancellationToken.None, TimeSpan.FromMinutes(10), deadline: null, deadlineFromClient: false, time);
        first.Dispose();
        var second = ForwardingCancellation.Rent(CancellationToken.None, TimeSpan.FromSeconds(2), deadline: null, deadlineFromClient: false, time);
        Assert.Same(first, second);
        time.Advance(TimeSpan.FromSeconds(2));
        Assert.True(second.Token.IsCancellationRequested);
        second.Dispose();
    }

    [Fact]
    public void Rented_NoActivityTimeout_NewObjectWithTheClientsToken_PoolKeptForTheNextTimedOne()
    {
        var time = new FakeTimeProvider();
        var first = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        first.Dispose();

        using var client = new CancellationTokenSource();
        var second = ForwardingCancellation.Rent(client.Token, Timeout.InfiniteTimeSpan, deadline: null, deadlineFromClient: false, time);
        Assert.NotSame(first, second); // nothing to reuse for it: a gRPC call without deadline has no source, no timer
        Assert.Equal(client.Token, second.Token);
        time.Advance(TimeSpan.FromHours(1));
        Assert.False(second.Token.IsCancellationRequested);
        Assert.False(second.TimedOut);
        second.Dispose();

        var third = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        Assert.Same(first, third);
        Assert.False(third.Token.IsCancellationRequested); // its timer, due in the pool an hour ago, expired nothing
        time.Advance(TimeSpan.FromSeconds(10));
        Assert.True(third.TimedOut);
        third.Dispose();
    }

    [Fact]
    public void Rented_ClientAborted_OrWithADeadline_OrAnotherClock_NotReused()
    {
        var time = new FakeTimeProvider();
        using var client = new CancellationTokenSource();
        var aborted = ForwardingCancellation.Rent(client.Token, Activity, deadline: null, deadlineFromClient: false, time);
        client.Cancel();
        Assert.True(aborted.ClientAborted);
        aborted.Dispose();
        var next = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, time);
        Assert.NotSame(aborted, next);
        Assert.False(next.Token.IsCancellationRequested);

        // next had no deadline: pooled. One with a deadline is not (its timer's callback cannot tell exchanges apart).
        next.Dispose();
        var withDeadline = ForwardingCancellation.Rent(CancellationToken.None, Activity, TimeSpan.FromSeconds(30), deadlineFromClient: true, time);
        Assert.Same(next, withDeadline);
        withDeadline.Dispose();
        var afterDeadline = ForwardingCancellation.Rent(CancellationToken.None, TimeSpan.FromHours(1), deadline: null, deadlineFromClient: false, time);
        Assert.NotSame(withDeadline, afterDeadline);
        time.Advance(TimeSpan.FromSeconds(31)); // the released deadline timer would have fired by now
        Assert.False(afterDeadline.Token.IsCancellationRequested);
        Assert.False(afterDeadline.DeadlineExpired);
        afterDeadline.Dispose();

        var otherClock = ForwardingCancellation.Rent(CancellationToken.None, Activity, deadline: null, deadlineFromClient: false, new FakeTimeProvider());
        Assert.NotSame(afterDeadline, otherClock);
        otherClock.Dispose();
    }
}
