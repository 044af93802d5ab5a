using System.Buffers;
using System.IO.Pipelines;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// A client that stops reading its socket (slow-read DoS): memory stays bounded, handlers are released,
/// stream slots stay taken while handlers run, and the connection ends after the write timeout.
/// The peer grants huge windows so only the transport (not flow control) holds the writer back.
/// </summary>
public class Http2SlowReaderTests
{
    private static readonly TimeSpan Bounded = TimeSpan.FromSeconds(20); // a hang guard, not a speed claim

    /// <summary>Handshake with windows so large the server's writer is only ever held back by the transport.</summary>
    private static async Task HandshakeWithHugeWindowsAsync(Http2TestPeer peer)
    {
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, int.MaxValue));
        await peer.SendWindowUpdateAsync(0, int.MaxValue - 65_535);
    }

    [Fact]
    public async Task HEADERS_OverLimitWhileResetStreamHandlerStillRuns_RefusedStream()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { MaxConcurrentStreams = 1 };
        await using var peer = await Http2TestPeer.StartAsync(async _ =>
        {
            started.TrySetResult();
            await gate.Task; // ignores RequestAborted on purpose
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await started.Task.WaitAsync(Bounded);
        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        // RFC 9113 §5.1.2: the reset stream's handler still runs, so its slot is still taken.
        await peer.SendRequestHeadersAsync(3);

        await peer.ExpectRstStreamAsync(3, Http2ErrorCode.RefusedStream);
        gate.SetResult();
    }

    [Fact]
    public async Task RST_STREAM_WhileWriterBlockedOnTransport_ReleasesHandlerInFlush()
    {
        var flushing = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var handlerDone = new TaskCompletionSource<FlushResult>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseBody.Write(new byte[4 * 1024 * 1024]);
            flushing.SetResult();
            // No RequestAborted token: the engine itself must release this flush.
            handlerDone.SetResult(await exchange.ResponseBody.FlushAsync());
        });
        await HandshakeWithHugeWindowsAsync(peer);
        await peer.SendRequestHeadersAsync(1);
        await flushing.Task.WaitAsync(Bounded);

        // The peer reads nothing, so the server's writer is stuck on the transport; the reset must not wait for it.
        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        var result = await handlerDone.Task.WaitAsync(Bounded);
        Assert.True(result.IsCompleted || result.IsCanceled);
    }

    [Fact]
    public async Task RST_STREAM_HandlerIgnoringFlushResultButPassingRequestAborted_EndsWithCancellation()
    {
        // A streaming handler that never looks at FlushResult.IsCompleted (a common gRPC server-streaming
        // loop) must still end once the client resets: FlushAsync honours the cancelled RequestAborted
        // token, as any PipeWriter does. Before the fix it spun at 100% CPU on completed flushes.
        var writing = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var handlerEnded = new TaskCompletionSource<Exception?>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            try
            {
                var chunk = new byte[512];
                while (true)
                {
                    await exchange.ResponseBody.WriteAsync(chunk, exchange.RequestAborted);
                    writing.TrySetResult();
                }
            }
            catch (Exception ex)
            {
                handlerEnded.SetResult(ex);
            }
        });
        await HandshakeWithHugeWindowsAsync(peer);
        await peer.SendRequestHeadersAsync(1);
        await writing.Task.WaitAsync(Bounded);

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        Assert.IsAssignableFrom<OperationCanceledException>(await handlerEnded.Task.WaitAsync(Bounded));
    }

    [Fact]
    public async Task WriteTimeout_PeerStopsReading_ConnectionAbortedAndHandlerReleased()
    {
        var time = new TimerCountingTimeProvider();
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { WriteTimeout = TimeSpan.FromSeconds(30), KeepAliveTimeout = Timeout.InfiniteTimeSpan };
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.RequestAborted.Register(() => aborted.TrySetResult());
            await exchange.ResponseBody.WriteAsync(new byte[4 * 1024 * 1024]);
        }, options, time);
        await HandshakeWithHugeWindowsAsync(peer);
        await peer.SendRequestHeadersAsync(1);
        await Http2AbuseTests.WaitForArmedTimerAsync(time); // the writer's flush is waiting on the transport

        time.Advance(TimeSpan.FromSeconds(31));

        await peer.ProcessTask.WaitAsync(Bounded);
        await aborted.Task.WaitAsync(Bounded);
    }

    [Fact]
    public async Task Abort_WhileWriterBlockedOnTransport_ClosesWithoutWaitingForTheFlush()
    {
        var time = new TimerCountingTimeProvider(); // never advanced: a close that waits on a timer would hang
        var flushing = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { KeepAliveTimeout = Timeout.InfiniteTimeSpan };
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseBody.Write(new byte[4 * 1024 * 1024]);
            flushing.SetResult();
            await exchange.ResponseBody.FlushAsync(exchange.RequestAborted);
        }, options, time);
        await HandshakeWithHugeWindowsAsync(peer);
        await peer.SendRequestHeadersAsync(1);
        await flushing.Task.WaitAsync(Bounded);
        await Http2AbuseTests.WaitForArmedTimerAsync(time); // the writer's flush is waiting on the transport

        peer.Connection.Abort();

        await peer.ProcessTask.WaitAsync(Bounded);
    }

    [Fact]
    public async Task GOAWAY_AfterConnectionError_NoMoreDataForOpenStreams()
    {
        var streaming = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            var chunk = new byte[16 * 1024];
            while (!exchange.RequestAborted.IsCancellationRequested)
            {
                streaming.TrySetResult();
                var result = await exchange.ResponseBody.WriteAsync(chunk);
                if (result.IsCompleted)
                {
                    break;
                }
            }
        });
        await HandshakeWithHugeWindowsAsync(peer);
        await peer.SendRequestHeadersAsync(1);
        await streaming.Task.WaitAsync(Bounded);

        // RFC 9113 §5.4.1: after a connection error the GOAWAY is the last frame; streams do not carry on.
        await peer.SendRawFrameAsync(Http2FrameType.Data, Http2FrameFlags.None, 0, new byte[1]);

        Http2TestFrame frame;
        do
        {
            frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        }
        while (frame.Type != Http2FrameType.GoAway);
        Assert.Equal(Http2ErrorCode.ProtocolError, frame.AsGoAway().ErrorCode);
        await peer.ExpectConnectionClosedAsync();
    }
}
