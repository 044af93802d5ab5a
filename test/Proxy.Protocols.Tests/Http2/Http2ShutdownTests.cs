using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class Http2ShutdownTests
{
    [Fact]
    public async Task Shutdown_TwoPhaseGoAway_OpenStreamFinishesThenClose()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await gate.Task;
            await exchange.ResponseBody.WriteAsync("bye"u8.ToArray());
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var shutdown = peer.Connection.ShutdownAsync();

        // Phase one (RFC 9113 §6.8): GOAWAY with 2^31-1, then a PING to time the round trip.
        Assert.Equal(int.MaxValue, await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError));
        var ping = await peer.ExpectPingAsync(ack: false);
        await peer.SendPingAsync(ping.OpaqueData, ack: true);
        // Phase two: the real last stream id.
        Assert.Equal(1, await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError));
        Assert.False(shutdown.IsCompleted);

        // A stream opened after the final GOAWAY is refused; the open one still finishes.
        await peer.SendRequestHeadersAsync(3);
        await peer.ExpectRstStreamAsync(3, Http2ErrorCode.RefusedStream);
        gate.SetResult();
        var response = await peer.ReadResponseAsync(1);
        Assert.Equal("bye", response.BodyText);
        await peer.ExpectConnectionClosedAsync();
        await shutdown.WaitAsync(TimeSpan.FromSeconds(20));
    }

    [Fact]
    public async Task GOAWAY_FromClient_ExistingStreamFinishesThenClose()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await gate.Task;
            await exchange.ResponseBody.WriteAsync("ok"u8.ToArray());
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.SendGoAwayAsync(0, Http2ErrorCode.NoError);
        gate.SetResult();

        Assert.Equal("ok", (await peer.ReadResponseAsync(1)).BodyText);
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.NoError);
        await peer.ProcessTask.WaitAsync(TimeSpan.FromSeconds(20));
    }

    [Fact]
    public async Task PeerClosesTransport_RequestAbortedFiresAndProcessReturns()
    {
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.RequestAborted.Register(() => aborted.TrySetResult());
            started.SetResult();
            await Task.Delay(Timeout.Infinite, exchange.RequestAborted);
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await started.Task.WaitAsync(TimeSpan.FromSeconds(20));

        await peer.CloseOutputAsync();

        await aborted.Task.WaitAsync(TimeSpan.FromSeconds(20));
        await peer.ProcessTask.WaitAsync(TimeSpan.FromSeconds(20));
    }

    [Fact]
    public async Task Abort_ClosesWithoutGoAway()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => Task.Delay(Timeout.Infinite, exchange.RequestAborted));
        await peer.HandshakeAsync();

        peer.Connection.Abort();

        await peer.ExpectConnectionClosedAsync();
        await peer.ProcessTask.WaitAsync(TimeSpan.FromSeconds(20));
    }
}
