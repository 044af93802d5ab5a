using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>The attacks of shared/design/ANCHORS.md: each limit ends the connection with ENHANCE_YOUR_CALM.</summary>
public class Http2AbuseTests
{
    private static Task Never(HttpExchange exchange) => Task.Delay(Timeout.Infinite, exchange.RequestAborted);

    [Fact]
    public async Task RST_STREAM_RapidResetOverLimit_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxStreamResetsPerWindow = 5 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();

        for (var i = 0; i < 6; i++)
        {
            var streamId = 2 * i + 1;
            await peer.SendRequestHeadersAsync(streamId);
            await peer.SendRstStreamAsync(streamId, Http2ErrorCode.Cancel);
        }

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task HEADERS_RefusedStreamsCountAsResets_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxConcurrentStreams = 1, MaxStreamResetsPerWindow = 3 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        for (var i = 1; i <= 4; i++)
        {
            await peer.SendRequestHeadersAsync(2 * i + 1);
        }

        for (var i = 1; i <= 3; i++)
        {
            await peer.ExpectRstStreamAsync(2 * i + 1, Http2ErrorCode.RefusedStream);
        }
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task DATA_ConsecutiveEmptyFramesOverLimit_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxConsecutiveEmptyFrames = 2 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", false);

        for (var i = 0; i < 3; i++)
        {
            await peer.SendDataAsync(1, Array.Empty<byte>(), endStream: false);
        }

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task DATA_EmptyFramesSeparatedByData_Allowed()
    {
        var options = new Http2Options { MaxConsecutiveEmptyFrames = 1 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", false);

        for (var i = 0; i < 5; i++)
        {
            await peer.SendDataAsync(1, Array.Empty<byte>(), endStream: false);
            await peer.SendDataAsync(1, new byte[1], endStream: false);
        }
        await peer.SendPingAsync(4);

        Assert.Equal(4UL, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
    }

    [Fact]
    public async Task CONTINUATION_MoreThanMaxContinuationFrames_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxContinuationFrames = 2 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders(extra: ("x-a", "0123456789")));
        await peer.SendHeaderBlockAsync(1, block[..2], endStream: true, endHeaders: false);

        await peer.SendContinuationAsync(1, block[2..4], endHeaders: false);
        await peer.SendContinuationAsync(1, block[4..6], endHeaders: false);
        await peer.SendContinuationAsync(1, block[6..], endHeaders: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task CONTINUATION_HeaderBlockOverMaxHeaderBlockSize_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxHeaderBlockSize = 100 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        await peer.SendHeaderBlockAsync(1, new byte[60], endStream: true, endHeaders: false);

        await peer.SendContinuationAsync(1, new byte[60], endHeaders: false);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task PING_FloodWhilePeerDoesNotRead_GoAwayEnhanceYourCalm()
    {
        var options = new Http2Options { MaxQueuedControlFrames = 10 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();

        // 5,000 PINGs without reading: the writer stalls on transport backpressure after ~64 KiB of ACKs,
        // then queued ACKs pass the cap (CVE-2019-9512).
        var pings = new List<byte>();
        for (var i = 0; i < 5000; i++)
        {
            pings.AddRange(new byte[] { 0, 0, 8, 6, 0, 0, 0, 0, 0 });
            pings.AddRange(BitConverter.GetBytes((long)i));
        }
        await peer.SendBytesAsync(pings.ToArray()).WaitAsync(TimeSpan.FromSeconds(20));

        Http2TestFrame frame;
        do
        {
            frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        }
        while (frame.Type == Http2FrameType.Ping);
        Assert.Equal(Http2FrameType.GoAway, frame.Type);
        Assert.Equal(Http2ErrorCode.EnhanceYourCalm, frame.AsGoAway().ErrorCode);
    }

    [Fact]
    public async Task Preface_NotSentInTime_ConnectionClosed()
    {
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { RequestHeadersTimeout = TimeSpan.FromSeconds(10) };
        await using var peer = await Http2TestPeer.StartAsync(Never, options, time);
        await WaitForArmedTimerAsync(time);

        time.Advance(TimeSpan.FromSeconds(11));

        await peer.ExpectSettingsAsync();
        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_BlockNotCompletedInTime_ConnectionClosed()
    {
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { RequestHeadersTimeout = TimeSpan.FromSeconds(10), KeepAliveTimeout = Timeout.InfiniteTimeSpan };
        await using var peer = await Http2TestPeer.StartAsync(Never, options, time);
        await peer.HandshakeAsync();
        await WaitForArmedTimerAsync(time, expected: 0); // no stream, no keep-alive limit: nothing armed
        var block = peer.EncodeHeaders(Http2TestPeer.RequestHeaders());
        await peer.SendHeaderBlockAsync(1, block[..2], endStream: true, endHeaders: false);
        await WaitForArmedTimerAsync(time); // the header-block timer

        time.Advance(TimeSpan.FromSeconds(11));

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task KeepAlive_IdleConnection_GoAwayNoErrorAndClose()
    {
        var time = new TimerCountingTimeProvider();
        var options = new Http2Options { KeepAliveTimeout = TimeSpan.FromSeconds(130) };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options, time);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ReadResponseAsync(1);
        await peer.SendPingAsync(1); // the stream-closed event is handled before this PING
        await peer.ExpectPingAsync(ack: true);

        time.Advance(TimeSpan.FromSeconds(129));
        await peer.SendPingAsync(2);
        await peer.ExpectPingAsync(ack: true); // still open just before the limit
        time.Advance(TimeSpan.FromSeconds(2));

        Assert.Equal(1, await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.NoError));
    }

    /// <summary>Waits (bounded, no sleep) until the engine armed <paramref name="expected"/> timers.</summary>
    internal static async Task WaitForArmedTimerAsync(TimerCountingTimeProvider time, int expected = 1)
    {
        // A hang guard, not a speed claim; Delay(1) rather than Yield so the poll does not starve the
        // connection's own loops on a loaded 2-core machine.
        var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(20);
        while (time.ActiveTimerCount != expected)
        {
            Assert.True(DateTime.UtcNow < deadline, $"Expected {expected} armed timers, found {time.ActiveTimerCount}.");
            await Task.Delay(1);
        }
    }
}

/// <summary>The abuse guards must not trip on honest clients.</summary>
public class Http2AbuseGuardFairnessTests
{
    private static Task Never(HttpExchange exchange) => Task.Delay(Timeout.Infinite, exchange.RequestAborted);

    [Fact]
    public async Task HEADERS_RefusedBeforeOurSettingsAcked_NotCountedAsResets()
    {
        var options = new Http2Options { MaxConcurrentStreams = 1, MaxStreamResetsPerWindow = 2 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.SendPrefaceAndSettingsAsync();
        await peer.ExpectSettingsAsync();
        await peer.ExpectSettingsAckAsync();

        // RFC 9113 §6.5.2 note: until it acknowledges our SETTINGS the client may assume no stream limit.
        for (var id = 1; id <= 9; id += 2)
        {
            await peer.SendRequestHeadersAsync(id);
        }
        for (var id = 3; id <= 9; id += 2)
        {
            await peer.ExpectRstStreamAsync(id, Http2ErrorCode.RefusedStream);
        }
        await peer.SendPingAsync(7);

        Assert.Equal(7UL, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
    }

    [Fact]
    public async Task DATA_EmptyFramesSeparatedByOtherFrames_Allowed()
    {
        var options = new Http2Options { MaxConsecutiveEmptyFrames = 1 };
        await using var peer = await Http2TestPeer.StartAsync(Never, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", false);

        // Far-apart empty DATA frames on a long connection are not a flood (CVE-2019-9518 is about adjacent ones).
        for (var i = 0UL; i < 4; i++)
        {
            await peer.SendDataAsync(1, Array.Empty<byte>(), endStream: false);
            await peer.SendPingAsync(i);
            Assert.Equal(i, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
        }
    }

    [Fact]
    public async Task HEADERS_DynamicTableUsedBeforeOurSettingsAcked_DecodedWithDefaultTableSize()
    {
        var options = new Http2Options { HeaderTableSize = 0 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.SendPrefaceAndSettingsAsync();
        await peer.ExpectSettingsAsync();
        await peer.ExpectSettingsAckAsync();

        // RFC 9113 §6.5.3: before the ACK the peer's encoder may still use the default 4,096-octet table.
        await peer.SendRequestHeadersAsync(1, extra: ("x-custom", "value"));
        Assert.Equal("200", (await peer.ReadResponseAsync(1)).Status);
        await peer.SendRequestHeadersAsync(3, extra: ("x-custom", "value")); // refers to dynamic entries now

        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
    }
}
