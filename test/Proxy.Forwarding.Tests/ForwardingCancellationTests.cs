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
}
