using System.Buffers;
using System.Text;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// HttpExchange.LendResponseBodyAsync on HTTP/2 (the relay's bulk path): the writer loop frames the caller's memory. The
/// bytes and their order, the windows and max frame size, that the memory is the caller's again once the task completes,
/// and every way a lend can end.
/// </summary>
public sealed class Http2LendTests
{
    private static readonly byte[] Content = MakeContent(200_003); // several frames, not a multiple of the frame size

    private static byte[] MakeContent(int length)
    {
        var bytes = new byte[length];
        new Random(7).NextBytes(bytes);
        return bytes;
    }

    /// <summary>The content as three segments of separate arrays, as a backend's input pipe holds it.</summary>
    /// <summary>A peer whose handler starts the response and lends <see cref="Content"/>; the lend's result goes to <paramref name="result"/>.</summary>
    private static async Task<Http2TestPeer> StartLenderAsync(TaskCompletionSource<bool> result)
        => await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.StartResponseAsync();
            result.SetResult(await exchange.LendResponseBodyAsync(Lendable(Content).Sequence));
        });

    private static (ReadOnlySequence<byte> Sequence, byte[][] Arrays) Lendable(byte[] content)
    {
        var cuts = new[] { 0, 70_001, 140_000, content.Length };
        var arrays = new byte[3][];
        Segment? first = null, last = null;
        for (var i = 0; i < 3; i++)
        {
            arrays[i] = content.AsSpan(cuts[i], cuts[i + 1] - cuts[i]).ToArray();
            var segment = new Segment(arrays[i], cuts[i]);
            if (last is null)
            {
                first = segment;
            }
            else
            {
                last.SetNext(segment);
            }
            last = segment;
        }
        return (new ReadOnlySequence<byte>(first!, 0, last!, last!.Memory.Length), arrays);
    }

    [Fact]
    public async Task Lend_BetweenBodyWrites_BytesInOrderWithinMaxFrameSize_MemoryFreeOnceItReturnsTrue()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            Assert.True(exchange.CanLendResponseBody);
            exchange.ResponseTrailers.Add("x-done", "yes");
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("<head>"));
            exchange.ResponseBody.Write(Encoding.ASCII.GetBytes("<unflushed>")); // written, not flushed: still goes first
            var (body, arrays) = Lendable(Content);
            var sent = await exchange.LendResponseBodyAsync(body);
            // The memory is ours again: what the client gets must not change when it does.
            foreach (var array in arrays)
            {
                array.AsSpan().Fill(0xEE);
            }
            lendResult.SetResult(sent);
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("<tail>"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1); // HEADERS, DATA with the windows given back, trailers

        var expected = Encoding.ASCII.GetBytes("<head><unflushed>").Concat(Content).Concat(Encoding.ASCII.GetBytes("<tail>")).ToArray();
        Assert.True(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
        Assert.Equal("200", response.Status);
        Assert.Equal(expected.Length, response.Body.Length);
        Assert.Equal(expected, response.Body);
        foreach (var frame in peer.ReceivedFrames.Where(f => f.Type == Http2FrameType.Data))
        {
            var data = frame.AsData();
            Assert.InRange(data.Data.Length, 0, 16_384); // the peer's SETTINGS_MAX_FRAME_SIZE (default)
            Assert.False(data.EndStream); // trailers end the stream
        }
        Assert.NotNull(response.Trailers);
        Assert.True(response.Trailers.EndStream);
        Assert.Equal("yes", response.Trailers["x-done"]);
    }

    [Fact]
    public async Task Lend_SmallWindows_NeverExceedsThem_TaskWaitsForTheLastFrame()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await StartLenderAsync(lendResult);
        const int streamWindow = 5000;
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, streamWindow));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);

        var received = new MemoryStream();
        long streamCredit = streamWindow, connectionCredit = 65_535;
        var ended = false;
        while (!ended)
        {
            var data = (await peer.ReceiveSkippingWindowUpdatesAsync()).AsData();
            streamCredit -= data.FlowControlledLength;
            connectionCredit -= data.FlowControlledLength;
            Assert.True(streamCredit >= 0, "DATA beyond the stream window");
            Assert.True(connectionCredit >= 0, "DATA beyond the connection window");
            received.Write(data.Data.ToArray());
            ended = data.EndStream;
            if (streamCredit == 0)
            {
                // The writer stopped at the window with bytes still lent: the lender must still be waiting.
                Assert.True(received.Length < Content.Length);
                Assert.False(lendResult.Task.IsCompleted);
                await peer.SendWindowUpdateAsync(1, 40_000);
                streamCredit += 40_000;
            }
            if (connectionCredit < 16_384)
            {
                await peer.SendWindowUpdateAsync(0, 100_000);
                connectionCredit += 100_000;
            }
        }

        Assert.True(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
        Assert.Equal(Content, received.ToArray());
    }

    [Fact]
    public async Task Lend_RevokedWhileBlockedOnWindow_ReturnsFalse_NothingMoreOfItIsSent()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        var revoke = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget == "/next")
            {
                await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("next"));
                return;
            }
            await exchange.StartResponseAsync();
            var lending = exchange.LendResponseBodyAsync(Lendable(Content).Sequence);
            await revoke.Task;
            exchange.RevokeLentResponseBody();
            lendResult.SetResult(await lending);
            exchange.Abort((uint)Http2ErrorCode.Cancel);
        });
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1000));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        var data = (await peer.ExpectDataAsync(1)).AsData();
        Assert.Equal(1000, data.Data.Length); // then blocked on the stream window
        Assert.Equal(Content.AsSpan(0, 1000).ToArray(), data.Data.ToArray());

        revoke.SetResult();

        Assert.False(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
        await peer.SendWindowUpdateAsync(1, 100_000); // credit now would let the rest go, had the lend not been dropped
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.Cancel); // the next frame of stream 1: no DATA before it
        await peer.SendRequestHeadersAsync(3, path: "/next");
        var response = await peer.ReadResponseAsync(3);
        Assert.Equal("next", response.BodyText);
    }

    [Fact]
    public async Task Lend_ClientResetsWhileLent_ReturnsFalse_TheConnectionServesTheNextStream()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget == "/next")
            {
                await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("next"));
                return;
            }
            await exchange.StartResponseAsync();
            lendResult.SetResult(await exchange.LendResponseBodyAsync(Lendable(Content).Sequence));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/lend");
        await peer.ExpectHeadersAsync(1);
        await peer.ExpectDataAsync(1); // flowing; the 64 KiB windows stop it soon after

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        Assert.False(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
        await peer.SendWindowUpdateAsync(0, 1 << 20); // whatever stream 1 used of the connection window
        await peer.SendRequestHeadersAsync(3, path: "/next");
        var body = new StringBuilder();
        while (true)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            if (frame.StreamId != 3)
            {
                continue; // DATA of stream 1 that left before the reset arrived
            }
            if (frame.Type == Http2FrameType.Data)
            {
                var data = frame.AsData();
                body.Append(Encoding.ASCII.GetString(data.Data.ToArray()));
                if (data.EndStream)
                {
                    break;
                }
            }
        }
        Assert.Equal("next", body.ToString());
    }

    [Fact]
    public async Task Lend_ConnectionClosesWhileLent_ReturnsFalse()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await StartLenderAsync(lendResult);
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1000));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        await peer.ExpectDataAsync(1); // 1000 bytes, then blocked on the stream window

        await peer.CloseOutputAsync();

        Assert.False(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
        await peer.ProcessTask.WaitAsync(peer.ReceiveTimeout);
    }

    [Fact]
    public async Task Lend_AfterTheClientReset_ReturnsFalseAtOnce()
    {
        var lendResult = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.StartResponseAsync();
            await exchange.ResponseBody.FlushAsync();
            var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            using (exchange.RequestAborted.Register(() => aborted.TrySetResult()))
            {
                await aborted.Task; // the engine learned of the reset (the stream's output is released before this fires)
            }
            lendResult.SetResult(await exchange.LendResponseBodyAsync(Lendable(Content).Sequence));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        Assert.False(await lendResult.Task.WaitAsync(peer.ReceiveTimeout));
    }

    private sealed class Segment : ReadOnlySequenceSegment<byte>
    {
        public Segment(byte[] array, long runningIndex)
        {
            Memory = array;
            RunningIndex = runningIndex;
        }

        public void SetNext(Segment next) => Next = next;
    }
}
