using System.Buffers;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class Http2FlowControlTests
{
    private static async Task EchoAsync(HttpExchange exchange)
    {
        while (true)
        {
            var result = await exchange.RequestBody.ReadAsync();
            foreach (var segment in result.Buffer)
            {
                await exchange.ResponseBody.WriteAsync(segment);
            }
            exchange.RequestBody.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                break;
            }
        }
    }

    [Fact]
    public async Task POST_Echo1MB_SmallWindowsBothWays_BodyRoundTrips()
    {
        const int size = 1024 * 1024;
        const int window = 16_384;
        var options = new Http2Options
        {
            InitialStreamWindowSize = window,
            InitialConnectionWindowSize = 65_535,
            MaxStreamOutputBufferSize = 8192,
        };
        await using var peer = await Http2TestPeer.StartAsync(EchoAsync, options);
        // The peer also grants the server only small windows, so both directions wait on WINDOW_UPDATE.
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, window));
        var payload = new byte[size];
        new Random(42).NextBytes(payload);
        await peer.SendRequestHeadersAsync(1, "POST", "/echo", endStream: false, ("content-length", size.ToString()));

        var received = new MemoryStream();
        var sendWindow = (long)window;      // server's stream window for us
        var connWindow = 65_535L;           // server's connection window for us
        var sent = 0;
        var serverStreamWindow = (long)window; // what we allowed the server on the stream
        var ended = false;
        Http2TestHeaders? headers = null;
        while (!ended)
        {
            // Send as much as the server's windows allow.
            while (sent < size && sendWindow > 0 && connWindow > 0)
            {
                var chunk = (int)Math.Min(Math.Min(sendWindow, connWindow), Math.Min(16_384, size - sent));
                await peer.SendDataAsync(1, payload.AsMemory(sent, chunk), endStream: sent + chunk == size);
                sent += chunk;
                sendWindow -= chunk;
                connWindow -= chunk;
            }
            var frame = await peer.ReceiveFrameAsync();
            switch (frame.Type)
            {
                case Http2FrameType.WindowUpdate:
                    var increment = frame.AsWindowUpdate().WindowSizeIncrement;
                    if (frame.StreamId == 0) connWindow += increment; else sendWindow += increment;
                    break;
                case Http2FrameType.Headers:
                    headers = await peer.DecodeHeaderBlockAsync(frame);
                    break;
                case Http2FrameType.Data:
                    var data = frame.AsData();
                    Assert.True(data.Data.Length <= serverStreamWindow, "The server exceeded the stream window we gave it.");
                    serverStreamWindow -= data.FlowControlledLength;
                    received.Write(data.Data.ToArray());
                    ended = data.EndStream;
                    if (data.FlowControlledLength > 0)
                    {
                        await peer.SendWindowUpdateAsync(0, data.FlowControlledLength);
                        if (!ended)
                        {
                            await peer.SendWindowUpdateAsync(1, data.FlowControlledLength);
                            serverStreamWindow += data.FlowControlledLength;
                        }
                    }
                    break;
                default:
                    Assert.Fail($"Unexpected {frame}");
                    break;
            }
        }

        Assert.Equal("200", headers?[":status"]);
        Assert.Equal(size, received.Length);
        Assert.True(payload.AsSpan().SequenceEqual(received.ToArray()));
    }

    [Fact]
    public async Task DATA_BeyondStreamWindow_FlowControlStreamError()
    {
        var options = new Http2Options { InitialStreamWindowSize = 100 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.Delay(Timeout.Infinite), options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        await peer.SendDataAsync(1, new byte[101], endStream: false);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.FlowControlError);
    }

    [Fact]
    public async Task DATA_BeyondConnectionWindow_FlowControlConnectionError()
    {
        var options = new Http2Options { InitialConnectionWindowSize = 65_535, InitialStreamWindowSize = 1 << 20, MaxFrameSize = 1 << 16 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.Delay(Timeout.Infinite), options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        await peer.SendDataAsync(1, new byte[65_536], endStream: false);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.FlowControlError);
    }

    [Fact]
    public async Task DATA_Padding_CountsTowardWindowAndIsReturned()
    {
        var options = new Http2Options { InitialStreamWindowSize = 100 };
        var bodyRead = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            var result = await exchange.RequestBody.ReadAsync();
            bodyRead.SetResult((int)result.Buffer.Length);
            exchange.RequestBody.AdvanceTo(result.Buffer.End);
            await Task.Delay(Timeout.Infinite, exchange.RequestAborted);
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        // 10 data bytes + 1 pad-length byte + 89 padding = 100: exactly the window.
        await peer.SendPaddedDataAsync(1, new byte[10], 89, endStream: false);
        Assert.Equal(10, await bodyRead.Task.WaitAsync(TimeSpan.FromSeconds(20)));

        // The 90 bytes of padding are credited back at once (the app never reads them).
        var update = await peer.ReceiveFrameAsync();
        Assert.Equal(Http2FrameType.WindowUpdate, update.Type);
        Assert.Equal(1, update.StreamId);
        Assert.Equal(90, update.AsWindowUpdate().WindowSizeIncrement);
        // 90 more bytes fit the stream window again; no RST_STREAM comes before the PING ACK.
        await peer.SendDataAsync(1, new byte[90], endStream: false);
        await peer.SendPingAsync(7);
        var ping = await peer.ExpectPingAsync(ack: true);
        Assert.Equal(7UL, ping.OpaqueData);
    }

    [Fact]
    public async Task WINDOW_UPDATE_ZeroIncrementOnStream_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.Delay(Timeout.Infinite));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.SendRawFrameAsync(Http2FrameType.WindowUpdate, Http2FrameFlags.None, 1, new byte[4]);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_ZeroIncrementOnConnection_ProtocolConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();

        await peer.SendRawFrameAsync(Http2FrameType.WindowUpdate, Http2FrameFlags.None, 0, new byte[4]);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_ConnectionWindowOverflow_FlowControlConnectionError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();

        await peer.SendWindowUpdateAsync(0, int.MaxValue);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.FlowControlError);
    }

    [Fact]
    public async Task WINDOW_UPDATE_StreamWindowOverflow_FlowControlStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.Delay(Timeout.Infinite));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.SendWindowUpdateAsync(1, int.MaxValue);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.FlowControlError);
    }

    [Fact]
    public async Task SETTINGS_InitialWindowSizeOverflowsOpenStream_FlowControlConnectionError()
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.StartResponseAsync();
            await gate.Task;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1); // the writer now tracks stream 1's window (65,535)
        await peer.SendWindowUpdateAsync(1, int.MaxValue - 65_535);

        await peer.SendSettingsAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 65_536));

        var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        if (frame.Type == Http2FrameType.Settings)
        {
            frame = await peer.ReceiveSkippingWindowUpdatesAsync(); // the ACK may precede the error
        }
        Assert.Equal(Http2FrameType.GoAway, frame.Type);
        Assert.Equal(Http2ErrorCode.FlowControlError, frame.AsGoAway().ErrorCode);
        gate.SetResult();
    }

    [Fact]
    public async Task SETTINGS_InitialWindowSizeRaised_UnblocksStalledResponse()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => exchange.ResponseBody.WriteAsync(new byte[100]).AsTask());
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 0));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);

        // With a zero window nothing can flow; raising the initial window applies to the open stream (RFC 9113 §6.9.2).
        await peer.SendSettingsAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 100));

        // The ACK and the DATA the new window allows may come in either order: the read loop applies the settings
        // (waking the writer for the stalled stream) and queues the ACK; §6.5.3 only asks that the values apply at once.
        // NOTE: END_STREAM rides with the data when the handler completed its response before the window opened, and
        // comes in an empty DATA frame of its own when the writer sent the bytes first (the handler runs on another
        // thread, which a busy machine may hold between its write and its completion).
        var frames = new List<Http2TestFrame>();
        while (frames.Count < 3 && !(frames.Any(f => f.Type == Http2FrameType.Settings && f.IsAck) && frames.Any(f => f.Type == Http2FrameType.Data && f.EndStream)))
        {
            frames.Add(await peer.ReceiveSkippingWindowUpdatesAsync());
        }
        Assert.Single(frames, f => f.Type == Http2FrameType.Settings && f.IsAck);
        var data = frames.Where(f => f.Type == Http2FrameType.Data).ToList();
        Assert.All(data, f => Assert.Equal(1, f.StreamId));
        Assert.Equal(100, data.Sum(f => f.AsData().Data.Length));
        Assert.True(data[^1].EndStream);
        Assert.Equal(100, data[0].AsData().Data.Length); // the whole window's worth in one frame
    }

    [Fact]
    public async Task Response_PeerMaxFrameSize_DataFramesRespectIt()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => exchange.ResponseBody.WriteAsync(new byte[40_000]).AsTask());
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.MaxFrameSize, 16_384));
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(40_000, response.Body.Length);
        Assert.All(peer.ReceivedFrames.Where(f => f.Type == Http2FrameType.Data), f => Assert.True(f.Payload.Length <= 16_384));
    }

    [Fact]
    public async Task DATA_OneStreamNeverReads_OtherStreamStillGetsConnectionCredit()
    {
        const int connectionWindow = 128 * 1024;
        const int streamWindow = 96 * 1024;
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var consumed = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { InitialConnectionWindowSize = connectionWindow, InitialStreamWindowSize = streamWindow };
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget == "/hog")
            {
                await gate.Task; // never reads its body
                return;
            }
            long total = 0;
            while (total < 32 * 1024)
            {
                var result = await exchange.RequestBody.ReadAsync();
                total += result.Buffer.Length;
                exchange.RequestBody.AdvanceTo(result.Buffer.End);
            }
            consumed.SetResult();
            await gate.Task;
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/hog", endStream: false);
        await peer.SendRequestHeadersAsync(3, "POST", "/reader", endStream: false);

        // Stream 1 fills its whole window and leaves it unread; stream 3 uses the rest of the connection window.
        for (var sent = 0; sent < streamWindow; sent += 16 * 1024)
        {
            await peer.SendDataAsync(1, new byte[16 * 1024], endStream: false);
        }
        await peer.SendDataAsync(3, new byte[16 * 1024], endStream: false);
        await peer.SendDataAsync(3, new byte[16 * 1024], endStream: false);
        await consumed.Task.WaitAsync(TimeSpan.FromSeconds(20));

        // RFC 9113 §6.9: the connection window is now 0; what stream 3 consumed must come back, or every stream stalls.
        var credited = 0;
        while (credited < 32 * 1024)
        {
            var frame = await peer.ReceiveFrameAsync();
            if (frame.Type == Http2FrameType.WindowUpdate && frame.StreamId == 0)
            {
                credited += frame.AsWindowUpdate().WindowSizeIncrement;
            }
        }
        Assert.Equal(32 * 1024, credited);
        gate.SetResult();
    }

    [Fact]
    public async Task DATA_AfterAppCompletedBodyWithError_ConnectionSurvivesAndCreditReturned()
    {
        var completed = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var options = new Http2Options { InitialConnectionWindowSize = 65_535, InitialStreamWindowSize = 65_535 };
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.RequestBody.Complete(new InvalidOperationException("The app stops reading."));
            completed.SetResult();
            await gate.Task;
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", endStream: false);
        await completed.Task.WaitAsync(TimeSpan.FromSeconds(20));

        // The abandoned bytes are dropped and their connection credit comes back; the connection carries on.
        for (var i = 0; i < 3; i++)
        {
            await peer.SendDataAsync(1, new byte[16_000], endStream: false);
        }
        var credited = 0;
        while (credited < 32_767)
        {
            var frame = await peer.ReceiveFrameAsync();
            Assert.NotEqual(Http2FrameType.GoAway, frame.Type);
            if (frame.Type == Http2FrameType.WindowUpdate && frame.StreamId == 0)
            {
                credited += frame.AsWindowUpdate().WindowSizeIncrement;
            }
        }
        await peer.SendPingAsync(9);
        Assert.Equal(9UL, (await peer.ExpectPingAsync(ack: true)).OpaqueData);
        gate.SetResult();
    }
}
