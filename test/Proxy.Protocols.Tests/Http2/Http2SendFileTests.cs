using System.Buffers;
using System.Text;
using Microsoft.Win32.SafeHandles;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// HttpExchange.SendFileAsync on HTTP/2: the writer loop reads the file into DATA frames itself. The bytes, their
/// order with body writes around them, the windows and max frame size, and every way the send can end.
/// </summary>
public sealed class Http2SendFileTests : IDisposable
{
    private readonly string _path = Path.GetTempFileName();
    private readonly byte[] _content = new byte[200_003]; // several frames and output blocks, not a multiple of either

    public Http2SendFileTests()
    {
        new Random(11).NextBytes(_content);
        File.WriteAllBytes(_path, _content);
    }

    public void Dispose() => File.Delete(_path);

    private SafeFileHandle Open() => File.OpenHandle(_path);

    [Fact]
    public async Task SendFile_BetweenBodyWrites_WithTrailers_BytesInOrderAndFramesWithinMaxFrameSize()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseTrailers.Add("x-done", "yes");
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("<head>"));
            exchange.ResponseBody.Write(Encoding.ASCII.GetBytes("<unflushed>")); // written, not flushed: still goes first
            using (var file = Open())
            {
                await exchange.SendFileAsync(file, 1000, 150_000);
            }
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("<tail>"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var headers = await peer.ExpectHeadersAsync(1);
        var body = new MemoryStream();
        Http2TestHeaders? trailers = null;
        while (trailers is null)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            Assert.Equal(1, frame.StreamId);
            if (frame.Type == Http2FrameType.Headers)
            {
                trailers = await peer.DecodeHeaderBlockAsync(frame);
                break;
            }
            var data = frame.AsData();
            Assert.InRange(data.Data.Length, 0, 16_384); // the peer's SETTINGS_MAX_FRAME_SIZE (default)
            Assert.False(data.EndStream); // trailers end the stream
            body.Write(data.Data.ToArray());
            await peer.SendWindowUpdateAsync(0, data.FlowControlledLength);
            await peer.SendWindowUpdateAsync(1, data.FlowControlledLength);
        }

        var expected = Encoding.ASCII.GetBytes("<head><unflushed>").Concat(_content.AsSpan(1000, 150_000).ToArray()).Concat(Encoding.ASCII.GetBytes("<tail>")).ToArray();
        Assert.Equal("200", headers[":status"]);
        Assert.Equal(expected.Length, body.Length);
        Assert.Equal(expected, body.ToArray());
        Assert.True(trailers.EndStream);
        Assert.Equal("yes", trailers["x-done"]);
    }

    [Fact]
    public async Task SendFile_SmallWindows_NeverExceedsThemAndResumesOnWindowUpdate()
    {
        var sent = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            using var file = Open();
            await exchange.SendFileAsync(file, 0, _content.Length);
            sent.SetResult();
        });
        const int streamWindow = 5000;
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, streamWindow));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);

        var body = new MemoryStream();
        long streamCredit = streamWindow, connectionCredit = 65_535;
        var ended = false;
        while (!ended)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            var data = frame.AsData();
            streamCredit -= data.FlowControlledLength;
            connectionCredit -= data.FlowControlledLength;
            Assert.True(streamCredit >= 0, "DATA beyond the stream window");
            Assert.True(connectionCredit >= 0, "DATA beyond the connection window");
            body.Write(data.Data.ToArray());
            ended = data.EndStream;
            if (streamCredit == 0)
            {
                // The server stopped at the window: nothing more until credit arrives, and the app is still waiting.
                Assert.Null(await ReceiveWithinAsync(peer, TimeSpan.FromMilliseconds(100)));
                Assert.False(sent.Task.IsCompleted);
                await peer.SendWindowUpdateAsync(1, 40_000);
                streamCredit += 40_000;
            }
            if (connectionCredit < 16_384)
            {
                await peer.SendWindowUpdateAsync(0, 100_000);
                connectionCredit += 100_000;
            }
        }

        await sent.Task.WaitAsync(peer.ReceiveTimeout);
        Assert.Equal(_content, body.ToArray());
    }

    [Fact]
    public async Task SendFile_ClientResetsMidFile_SendReturnsAndTheConnectionServesTheNextStream()
    {
        var firstReturned = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget == "/file")
            {
                using var file = Open();
                await exchange.SendFileAsync(file, 0, _content.Length);
                firstReturned.SetResult();
                return;
            }
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("next"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/file");
        await peer.ExpectHeadersAsync(1);
        await peer.ExpectDataAsync(1); // the file is flowing; the 64 KiB windows stop it soon after

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        await firstReturned.Task.WaitAsync(peer.ReceiveTimeout);
        await peer.SendWindowUpdateAsync(0, 1 << 20); // whatever stream 1 used of the connection window
        await peer.SendRequestHeadersAsync(3, path: "/next");
        var response = await ReadSkippingStreamAsync(peer, 3, skip: 1);
        Assert.Equal("next", response);
    }

    [Fact]
    public async Task SendFile_TokenCanceledWhileBlockedOnWindow_ThrowsOperationCanceled()
    {
        var outcome = new TaskCompletionSource<Exception?>(TaskCreationOptions.RunContinuationsAsynchronously);
        using var cts = new CancellationTokenSource();
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            using var file = Open();
            try
            {
                await exchange.SendFileAsync(file, 0, _content.Length, cts.Token);
                outcome.SetResult(null);
            }
            catch (Exception e)
            {
                outcome.SetResult(e);
                throw;
            }
        });
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1000));
        await peer.SendRequestHeadersAsync(1);
        await peer.ExpectHeadersAsync(1);
        var data = (await peer.ExpectDataAsync(1)).AsData();
        Assert.Equal(1000, data.Data.Length); // then blocked on the stream window

        cts.Cancel();

        var thrown = await outcome.Task.WaitAsync(peer.ReceiveTimeout);
        Assert.IsAssignableFrom<OperationCanceledException>(thrown);
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.InternalError); // the handler threw after the response started
    }

    [Fact]
    public async Task SendFile_CountBeyondTheFile_BodyEndsAtTheFileEnd()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            using var file = Open();
            await exchange.SendFileAsync(file, _content.Length - 10, 1000); // the file shrank since its length was read
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(_content.AsSpan(_content.Length - 10).ToArray(), response.Body);
    }

    [Fact]
    public async Task SendFile_ReadFails_StreamResetAndOtherStreamsCarryOn()
    {
        var thrown = new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget == "/bad")
            {
                // A handle opened for writing only: every read fails.
                using var file = File.OpenHandle(_path, FileMode.Open, FileAccess.Write);
                try
                {
                    await exchange.SendFileAsync(file, 0, 1000);
                }
                catch (Exception e)
                {
                    thrown.SetResult(e);
                    throw;
                }
                return;
            }
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("fine"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/bad");
        await peer.ExpectHeadersAsync(1);

        var error = await thrown.Task.WaitAsync(peer.ReceiveTimeout);
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.InternalError);
        await peer.SendRequestHeadersAsync(3, path: "/fine");
        var response = await peer.ReadResponseAsync(3);

        Assert.IsNotType<OperationCanceledException>(error);
        Assert.Equal("fine", response.BodyText);
    }

    [Fact]
    public async Task SendFile_ZeroCount_SendsNothingAndTheResponseCompletes()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            using var file = Open();
            await exchange.SendFileAsync(file, 5, 0);
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("after"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("after", response.BodyText);
    }

    private static async Task<Http2TestFrame?> ReceiveWithinAsync(Http2TestPeer peer, TimeSpan wait)
    {
        var previous = peer.ReceiveTimeout;
        peer.ReceiveTimeout = wait;
        try
        {
            return await peer.TryReceiveFrameAsync();
        }
        catch (TimeoutException)
        {
            return null;
        }
        finally
        {
            peer.ReceiveTimeout = previous;
        }
    }

    /// <summary>Reads stream <paramref name="streamId"/>'s response body as text, ignoring frames still in flight for <paramref name="skip"/>.</summary>
    private static async Task<string> ReadSkippingStreamAsync(Http2TestPeer peer, int streamId, int skip)
    {
        var body = new StringBuilder();
        var sawHeaders = false;
        while (true)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            if (frame.StreamId == skip)
            {
                continue;
            }
            Assert.Equal(streamId, frame.StreamId);
            if (frame.Type == Http2FrameType.Headers)
            {
                sawHeaders = true;
                if ((await peer.DecodeHeaderBlockAsync(frame)).EndStream)
                {
                    return body.ToString();
                }
                continue;
            }
            Assert.True(sawHeaders);
            var data = frame.AsData();
            body.Append(Encoding.ASCII.GetString(data.Data.ToArray()));
            if (data.EndStream)
            {
                return body.ToString();
            }
        }
    }
}
