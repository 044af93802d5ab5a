using System.Buffers;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class Http2StreamStateTests
{
    private static Task Never(HttpExchange exchange) => Task.Delay(Timeout.Infinite, exchange.RequestAborted);

    [Fact]
    public async Task Preface_Invalid_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.SendBytesAsync("GET / HTTP/1.1\r\nHost: x\r\n\r\n"u8.ToArray());

        await peer.ExpectSettingsAsync();
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task Preface_FirstFrameNotSettings_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.SendPrefaceAsync();
        await peer.SendPingAsync(1);

        await peer.ExpectSettingsAsync();
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_EvenStreamId_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(2);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_DecreasingStreamId_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(5);
        await peer.ReadResponseAsync(5);

        // RFC 9113 §5.1.1: stream 3 was never used; a lower new id is "an unexpected stream identifier".
        await peer.SendRequestHeadersAsync(3);

        Assert.Equal(5, await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError));
    }

    [Fact]
    public async Task HEADERS_OnStreamClosedByEndStream_StreamClosedConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ReadResponseAsync(1);

        // RFC 9113 §5.1 (closed): frames after both END_STREAMs are a STREAM_CLOSED error.
        await peer.SendRequestHeadersAsync(1);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.StreamClosed);
    }

    [Fact]
    public async Task DATA_OnIdleStream_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendDataAsync(1, new byte[1], endStream: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task RST_STREAM_OnIdleStream_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_OnIdleStream_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendWindowUpdateAsync(3, 10);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task CONTINUATION_WithoutHeaders_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendContinuationAsync(1, peer.EncodeHeaders(Http2TestPeer.RequestHeaders()), endHeaders: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task DATA_OnHalfClosedRemoteStream_StreamClosedError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, endStream: true);

        await peer.SendDataAsync(1, new byte[4], endStream: false);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.StreamClosed);
    }

    [Fact]
    public async Task HEADERS_AfterEndStream_StreamClosedError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, endStream: true);

        await peer.SendHeadersAsync(1, [new("x-trailer", "1")], endStream: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.StreamClosed);
    }

    [Fact]
    public async Task DATA_Received_OnClosedStream_StreamClosedError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, endStream: true);
        await peer.ReadResponseAsync(1); // both sides ended: closed

        await peer.SendDataAsync(1, new byte[4], endStream: false);

        var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        Assert.Equal(Http2FrameType.RstStream, frame.Type);
        Assert.Equal(Http2ErrorCode.StreamClosed, frame.AsRstStream().ErrorCode);
    }

    [Fact]
    public async Task DATA_AfterClientReset_StreamClosedError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);
        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        await peer.SendDataAsync(1, new byte[4], endStream: false);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.StreamClosed);
    }

    [Fact]
    public async Task DATA_AfterServerReset_Ignored()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);
        await peer.SendWindowUpdateAsync(1, 0); // provokes our RST_STREAM (PROTOCOL_ERROR)
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);

        await peer.SendDataAsync(1, new byte[4], endStream: false);
        await peer.SendPingAsync(9);

        // RFC 9113 §5.4.2: frames in flight after our RST_STREAM are ignored, so the PING ACK is next.
        var ping = await peer.ExpectPingAsync(ack: true);
        Assert.Equal(9UL, ping.OpaqueData);
    }

    [Fact]
    public async Task WINDOW_UPDATE_And_PRIORITY_OnClosedStream_Allowed()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ReadResponseAsync(1);

        await peer.SendWindowUpdateAsync(1, 100);
        await peer.SendPriorityAsync(1, 0);
        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);
        await peer.SendPingAsync(3);

        var ping = await peer.ExpectPingAsync(ack: true);
        Assert.Equal(3UL, ping.OpaqueData);
    }

    [Fact]
    public async Task PRIORITY_SelfDependency_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendPriorityAsync(3, 3);

        await peer.ExpectRstStreamAsync(3, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_PrioritySelfDependency_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders());
        var payload = new byte[5 + block.Length];
        payload[3] = 1; // depends on stream 1
        payload[4] = 15;
        block.CopyTo(payload, 5);

        await peer.SendRawFrameAsync(Http2FrameType.Headers, Http2FrameFlags.EndHeaders | Http2FrameFlags.EndStream | Http2FrameFlags.Priority, 1, payload);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task PUSH_PROMISE_FromClient_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.SendRawFrameAsync(Http2FrameType.PushPromise, Http2FrameFlags.EndHeaders, 1, new byte[] { 0, 0, 0, 2 });

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task UnknownFrameType_Ignored()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendRawFrameAsync(0xfa, Http2FrameFlags.None, 0, new byte[] { 1, 2, 3 });
        await peer.SendPingAsync(5);

        Assert.Equal(5UL, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
    }

    [Fact]
    public async Task UnknownFrame_InsideHeaderBlock_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders());
        await peer.SendHeaderBlockAsync(1, block, endStream: true, endHeaders: false);

        await peer.SendRawFrameAsync(0xfa, Http2FrameFlags.None, 0, new byte[] { 1 });

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task CONTINUATION_OnOtherStream_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders());
        await peer.SendHeaderBlockAsync(1, block[..2], endStream: true, endHeaders: false);

        await peer.SendContinuationAsync(3, block[2..], endHeaders: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_SplitOverContinuation_RequestReachesApp()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-path", exchange.RawTarget);
            exchange.ResponseHeaders.Add("x-h", exchange.RequestHeaders.Get("x-h") ?? "");
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders(path: "/split", extra: ("x-h", "v")));
        await peer.SendHeaderBlockAsync(1, block[..3], endStream: true, endHeaders: false);
        await peer.SendContinuationAsync(1, block[3..6], endHeaders: false);

        await peer.SendContinuationAsync(1, block[6..], endHeaders: true);

        var headers = await peer.ExpectHeadersAsync(1);
        Assert.Equal("/split", headers["x-path"]);
        Assert.Equal("v", headers["x-h"]);
    }

    [Fact]
    public async Task HEADERS_UndecodableBlock_CompressionConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        // 0xFF... : an indexed field far beyond both tables.
        await peer.SendHeaderBlockAsync(1, new byte[] { 0xff, 0xff, 0xff, 0x0f }, endStream: true, endHeaders: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.CompressionError);
    }

    [Fact]
    public async Task RST_STREAM_FromClient_CancelsRequestAbortedAndStopsOutput()
    {
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var writesAfterReset = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.RequestAborted.Register(() => aborted.TrySetResult());
            await exchange.ResponseBody.WriteAsync(new byte[10]);
            await aborted.Task;
            var flush = await exchange.ResponseBody.WriteAsync(new byte[10]);
            writesAfterReset.SetResult(flush.IsCompleted);
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        await peer.ExpectDataAsync(1);

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        await aborted.Task.WaitAsync(TimeSpan.FromSeconds(20));
        Assert.True(await writesAfterReset.Task.WaitAsync(TimeSpan.FromSeconds(20)));
        await peer.SendPingAsync(11);
        // No frame for stream 1 may follow the reset.
        Assert.Equal(11UL, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
    }

    [Fact]
    public async Task App_Abort_SendsRstStreamWithCode()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.Abort((uint)Http2ErrorCode.Cancel);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.Cancel);
    }

    private static Task RespondDone(HttpExchange exchange) => exchange.ResponseBody.WriteAsync("done"u8.ToArray()).AsTask();

    [Fact]
    public async Task Response_BeforeRequestBodyEnded_NoGracePeriod_ResetNoErrorAtOnce()
    {
        var time = new TimerCountingTimeProvider(); // never advanced: the reset must not wait for a timer
        var options = new Http2Options { RequestEndGracePeriod = TimeSpan.Zero };
        await using var peer = await Http2TestPeer.StartAsync(RespondDone, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("done", response.BodyText);
        // RFC 9113 §8.1: the request never ended, so the server resets with NO_ERROR after a complete response.
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.NoError);
    }

    [Fact]
    public async Task Response_BeforeRequestBodyEnded_ClientNeverEnds_ResetNoErrorWhenGracePasses()
    {
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { KeepAliveTimeout = Timeout.InfiniteTimeSpan, RequestEndGracePeriod = TimeSpan.FromSeconds(1) };
        await using var peer = await Http2TestPeer.StartAsync(RespondDone, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);
        Assert.Equal("done", (await peer.ReadResponseAsync(1)).BodyText);
        await Http2AbuseTests.WaitForArmedTimerAsync(time); // the stream waits for the request's end

        time.Advance(TimeSpan.FromSeconds(1));

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.NoError);
    }

    [Fact]
    public async Task Response_BeforeRequestBodyEnded_ClientEndsWithinGrace_ClosedWithoutReset()
    {
        // grpc-js reports a RST_STREAM(NO_ERROR) that overtakes its own END_STREAM as INTERNAL (grpc-node #2569):
        // an END_STREAM that comes within the grace closes the stream normally, and no reset is ever sent.
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { KeepAliveTimeout = Timeout.InfiniteTimeSpan, RequestEndGracePeriod = TimeSpan.FromSeconds(1) };
        await using var peer = await Http2TestPeer.StartAsync(RespondDone, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);
        Assert.Equal("done", (await peer.ReadResponseAsync(1)).BodyText);
        await Http2AbuseTests.WaitForArmedTimerAsync(time);

        await peer.SendDataAsync(1, new byte[100], endStream: false); // dropped: the handler is gone
        await peer.SendDataAsync(1, new byte[100], endStream: true);
        await peer.SendRequestHeadersAsync(3);
        Assert.Equal("done", (await peer.ReadResponseAsync(3)).BodyText);
        time.Advance(TimeSpan.FromSeconds(2)); // the grace timer fires and finds nothing to reset
        await peer.SendPingAsync(7);
        await peer.ExpectPingAsync(ack: true);

        Assert.DoesNotContain(peer.ReceivedFrames, f => f.Type == Http2FrameType.RstStream);
    }

    [Fact]
    public async Task Response_BeforeDeclaredBodyLargerThanStreamWindow_ResetNoErrorAtOnce()
    {
        // The client cannot finish a 10 MB body within the 768 KiB window it has: waiting would only delay the reset.
        var time = new TimerCountingTimeProvider(); // never advanced
        var options = new Http2Options { RequestEndGracePeriod = TimeSpan.FromSeconds(1) };
        await using var peer = await Http2TestPeer.StartAsync(RespondDone, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false, extra: ("content-length", "10000000"));

        Assert.Equal("done", (await peer.ReadResponseAsync(1)).BodyText);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.NoError);
    }

    [Fact]
    public async Task PING_ReplyCarriesSamePayload_AckIgnored()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();

        await peer.SendPingAsync(0x0102030405060708, ack: true);
        await peer.SendPingAsync(0x1122334455667788);

        var ping = await peer.ExpectPingAsync(ack: true);
        Assert.Equal(0x1122334455667788UL, ping.OpaqueData);
    }

    [Fact]
    public async Task RequestBody_TrailersAndContent_ReachApp()
    {
        var seen = new TaskCompletionSource<(string Body, string? Trailer)>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            var body = new List<byte>();
            while (true)
            {
                var result = await exchange.RequestBody.ReadAsync();
                body.AddRange(result.Buffer.ToArray());
                exchange.RequestBody.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted) break;
            }
            seen.SetResult((System.Text.Encoding.ASCII.GetString(body.ToArray()), exchange.RequestTrailers.Get("x-checksum")));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);
        await peer.SendDataAsync(1, "abc"u8.ToArray(), endStream: false);

        await peer.SendHeadersAsync(1, [new("x-checksum", "42")], endStream: true);

        var (text, trailer) = await seen.Task.WaitAsync(TimeSpan.FromSeconds(20));
        Assert.Equal("abc", text);
        Assert.Equal("42", trailer);
    }

    [Fact]
    public async Task Trailers_WithoutEndStream_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(Never);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        await peer.SendHeadersAsync(1, [new("x-trailer", "1")], endStream: false);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_ZeroIncrementOnClosedStream_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ReadResponseAsync(1);

        // RFC 9113 §6.9: a zero increment is an error whatever the stream's state.
        await peer.SendWindowUpdateAsync(1, 0);
        await peer.SendPingAsync(1);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_OverflowAfterResponseEnded_FlowControlStreamError()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.CompleteAsync();
            await gate.Task; // the stream stays half-closed (local): the request is still open
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", endStream: false);
        Assert.True((await peer.ExpectHeadersAsync(1)).EndStream);

        // RFC 9113 §6.9.1: a window above 2^31-1 is a FLOW_CONTROL_ERROR even after our END_STREAM.
        await peer.SendWindowUpdateAsync(1, int.MaxValue);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.FlowControlError);
        gate.SetResult();
    }

    [Fact]
    public async Task SETTINGS_InitialWindowSizeOverflow_NoAckBeforeGoAway()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.StartResponseAsync();
            await gate.Task;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        await peer.SendWindowUpdateAsync(1, int.MaxValue - 65_535);

        await peer.SendSettingsAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 65_536));

        // The SETTINGS were rejected (RFC 9113 §6.9.2): they must not be acknowledged.
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.FlowControlError);
        gate.SetResult();
    }
}
