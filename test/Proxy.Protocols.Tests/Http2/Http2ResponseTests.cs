using System.Buffers;
using System.Text;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class Http2ResponseTests
{
    [Fact]
    public async Task GET_WithResponseBody_HeadersThenDataEndStream()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            Assert.Equal("GET", exchange.Method);
            Assert.Equal("/hello?x=1", exchange.RawTarget);
            Assert.Equal("localhost", exchange.Authority);
            Assert.Equal("http", exchange.Scheme);
            Assert.Equal("HTTP/2", exchange.Protocol);
            Assert.False(exchange.RequestHasBody);
            exchange.ResponseHeaders.Add("Content-Type", "text/plain");
            await exchange.ResponseBody.WriteAsync(Encoding.UTF8.GetBytes("hello world"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/hello?x=1");

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Status);
        Assert.Equal("text/plain", response.Headers["content-type"]);
        Assert.Equal("hello world", response.BodyText);
        Assert.Null(response.Trailers);
    }

    [Fact]
    public async Task Handshake_ServerSettings_AdvertiseLimitsAndRaiseConnectionWindow()
    {
        var options = new Http2Options { MaxConcurrentStreams = 7, InitialStreamWindowSize = 12345, InitialConnectionWindowSize = 1 << 20 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.SendPrefaceAndSettingsAsync();

        var settings = await peer.ExpectSettingsAsync();
        var update = await peer.ReceiveFrameAsync();

        Assert.Contains(new Http2Setting(Http2SettingsParameter.MaxConcurrentStreams, 7), settings);
        Assert.Contains(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 12345), settings);
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.MaxFrameSize);
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.MaxHeaderListSize);
        Assert.Equal(Http2FrameType.WindowUpdate, update.Type);
        Assert.Equal(0, update.StreamId);
        Assert.Equal((1 << 20) - 65535, update.AsWindowUpdate().WindowSizeIncrement);
        await peer.SendSettingsAckAsync();
        await peer.ExpectSettingsAckAsync();
    }
}

public class Http2ResponseShapeTests
{
    [Fact]
    public async Task Response_WithoutBody_EndsStreamOnHeaders()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.StatusCode = 204;
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var headers = await peer.ExpectHeadersAsync(1);

        Assert.Equal("204", headers[":status"]);
        Assert.True(headers.EndStream);
    }

    [Fact]
    public async Task App_CompletesThenResets_WholeResponseWithTrailersBeforeTheReset()
    {
        // Grpc.AspNetCore at a deadline: CompleteAsync with grpc-status in the trailers, then a reset at once. The reset
        // must not overtake the completed response in the writer loop, or the client gets no status.
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseHeaders.Add("content-type", "application/grpc");
            await exchange.ResponseBody.WriteAsync(new byte[] { 0, 0, 0, 0, 0 });
            exchange.ResponseTrailers.Add("grpc-status", "4");
            await exchange.CompleteAsync();
            exchange.Abort((uint)Http2ErrorCode.Cancel);
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/svc/Method", endStream: true, ("te", "trailers"));

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(5, response.Body.Length);
        Assert.True(response.Trailers?.EndStream, "no trailers with END_STREAM");
        Assert.Equal("4", response.Trailers!["grpc-status"]);
        // Then the reset, or nothing when the loop had already ended the stream; never a frame the response lost.
        await peer.SendPingAsync(7);
        var next = await peer.ReceiveSkippingWindowUpdatesAsync();
        if (next.Type == Http2FrameType.RstStream)
        {
            Assert.Equal(1, next.StreamId);
            next = await peer.ReceiveSkippingWindowUpdatesAsync();
        }
        Assert.Equal(Http2FrameType.Ping, next.Type);
    }

    [Fact]
    public async Task Response_WithTrailers_FinalHeadersCarryEndStream()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseHeaders.Add("content-type", "application/grpc");
            await exchange.ResponseBody.WriteAsync(new byte[] { 0, 0, 0, 0, 0 });
            exchange.ResponseTrailers.Add("grpc-status", "0");
            exchange.ResponseTrailers.Add("Grpc-Message", "ok");
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/svc/Method", endStream: true, ("te", "trailers"));

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(5, response.Body.Length);
        Assert.NotNull(response.Trailers);
        Assert.True(response.Trailers!.EndStream);
        Assert.Equal("0", response.Trailers["grpc-status"]);
        Assert.Equal("ok", response.Trailers["grpc-message"]);
        Assert.DoesNotContain(response.Trailers.Fields, f => f.Key.StartsWith(':'));
    }

    [Fact]
    public async Task StartResponseAsync_SendsHeadersBeforeAnyData()
    {
        var releaseBody = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchange.ResponseHeaders.Add("content-type", "text/event-stream");
            await exchange.StartResponseAsync();
            await releaseBody.Task;
            await exchange.ResponseBody.WriteAsync("data: 1\n\n"u8.ToArray());
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        // The handler is parked before writing any body byte: HEADERS must already be on the wire.
        var headers = await peer.ExpectHeadersAsync(1);
        Assert.False(headers.EndStream);
        Assert.Equal("text/event-stream", headers["content-type"]);

        releaseBody.SetResult();
        var data = await peer.ExpectDataAsync(1);
        Assert.Equal("data: 1\n\n", Encoding.UTF8.GetString(data.AsData().Data.ToArray()));
    }

    [Fact]
    public async Task Response_ConnectionSpecificHeaders_AreDroppedAndNamesLowercased()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("Connection", "close");
            exchange.ResponseHeaders.Add("Transfer-Encoding", "chunked");
            exchange.ResponseHeaders.Add("Keep-Alive", "5");
            exchange.ResponseHeaders.Add("TE", "trailers"); // a request field only (RFC 9113 §8.2.2): never in a response
            exchange.ResponseHeaders.Add("X-Custom", "Value");
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var headers = await peer.ExpectHeadersAsync(1);

        Assert.Equal("Value", headers["x-custom"]);
        Assert.DoesNotContain(headers.Fields, f => f.Key is "connection" or "transfer-encoding" or "keep-alive" or "te");
        Assert.All(headers.Fields, f => Assert.Equal(f.Key.ToLowerInvariant(), f.Key));
    }

    [Fact]
    public async Task Handler_ThrowsBeforeResponse_Responds500()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => throw new InvalidOperationException("boom"));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var headers = await peer.ExpectHeadersAsync(1);

        Assert.Equal("500", headers[":status"]);
        Assert.True(headers.EndStream);
    }

    [Fact]
    public async Task Handler_ReturnsNoTask_Responds500AndTheConnectionCarriesOn()
    {
        var calls = 0;
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            if (Interlocked.Increment(ref calls) == 1)
            {
                return null!; // a broken handler: no task to wait for
            }
            exchange.StatusCode = 204;
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var first = await peer.ExpectHeadersAsync(1);
        await peer.SendRequestHeadersAsync(3);
        var second = await peer.ExpectHeadersAsync(3);

        Assert.Equal("500", first[":status"]);
        Assert.True(first.EndStream);
        Assert.Equal("204", second[":status"]);
    }

    [Fact]
    public async Task Handler_ThrowsAfterResponseStarted_ResetsWithInternalError()
    {
        var headersSeen = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.StartResponseAsync();
            await headersSeen.Task;
            throw new InvalidOperationException("boom");
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        await peer.ExpectHeadersAsync(1);
        headersSeen.SetResult();
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.InternalError);
    }

    [Fact]
    public async Task Streams_100Concurrent_AllCompleteWithInterleavedData()
    {
        const int streams = 100;
        const int bodySize = 40_000; // three DATA frames each at 16 KiB
        var started = 0;
        var allStarted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (Interlocked.Increment(ref started) == streams)
            {
                allStarted.SetResult();
            }
            await allStarted.Task;
            var id = int.Parse(exchange.RawTarget.TrimStart('/'));
            var body = new byte[bodySize];
            Array.Fill(body, (byte)(id % 251));
            for (var offset = 0; offset < body.Length; offset += 10_000)
            {
                await exchange.ResponseBody.WriteAsync(body.AsMemory(offset, 10_000));
            }
        }, new Http2Options { MaxConcurrentStreams = streams });
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1 << 20));
        await peer.SendWindowUpdateAsync(0, streams * bodySize);
        for (var i = 0; i < streams; i++)
        {
            var streamId = 2 * i + 1;
            await peer.SendRequestHeadersAsync(streamId, path: "/" + streamId);
        }

        var bodies = new Dictionary<int, MemoryStream>();
        var dataOrder = new List<int>();
        var ended = 0;
        while (ended < streams)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            if (frame.Type == Http2FrameType.Headers)
            {
                var headers = await peer.DecodeHeaderBlockAsync(frame);
                Assert.Equal("200", headers[":status"]);
                bodies[frame.StreamId] = new MemoryStream();
                continue;
            }
            Assert.Equal(Http2FrameType.Data, frame.Type);
            var data = frame.AsData();
            bodies[frame.StreamId].Write(data.Data.ToArray());
            dataOrder.Add(frame.StreamId);
            if (data.EndStream)
            {
                ended++;
            }
        }

        Assert.Equal(streams, bodies.Count);
        foreach (var (id, body) in bodies)
        {
            var bytes = body.ToArray();
            Assert.Equal(bodySize, bytes.Length);
            Assert.All(bytes, b => Assert.Equal((byte)(id % 251), b));
        }
        // Round robin: some stream's DATA frames are separated by another stream's frames.
        var interleaved = dataOrder.Select((id, index) => (id, index))
            .GroupBy(x => x.id)
            .Any(g => g.Last().index - g.First().index + 1 > g.Count());
        Assert.True(interleaved, "Expected DATA frames of different streams to interleave.");
    }
}

public class Http2ResponseHeaderBlockTests
{
    [Fact]
    public async Task Response_HeadersLargerThanPeerMaxFrameSize_SplitIntoContinuation()
    {
        var big = new string('v', 20_000);
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-big", big);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var headers = await peer.ExpectHeadersAsync(1);

        Assert.Equal(big, headers["x-big"]);
        Assert.Contains(peer.ReceivedFrames, f => f.Type == Http2FrameType.Continuation && f.StreamId == 1);
        Assert.All(peer.ReceivedFrames, f => Assert.True(f.Payload.Length <= 16_384));
    }
}

/// <summary>RFC 9113 §8.2.1: we MUST NOT generate invalid fields; a bad one is the app's error, never the connection's.</summary>
public class Http2ResponseHeaderValidationTests
{
    [Theory]
    [InlineData("x-bad", "price \u20AC")]   // beyond one octet: HPACK cannot carry it
    [InlineData("x-bad", "a\r\nx-injected: 1")]
    [InlineData("x-bad", "nul\0")]
    [InlineData("x bad", "v")]               // not a token
    [InlineData("x-bad\u00E9", "v")]
    public async Task Response_InvalidHeaderField_AppGetsInvalidOperation500AndConnectionSurvives(string name, string value)
    {
        var appError = new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget != "/bad")
            {
                return;
            }
            exchange.ResponseHeaders.Add(name, value);
            try
            {
                await exchange.StartResponseAsync();
            }
            catch (Exception ex)
            {
                appError.SetResult(ex);
                throw;
            }
            appError.SetResult(new Exception("StartResponseAsync accepted the field."));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/bad");

        Assert.IsType<InvalidOperationException>(await appError.Task.WaitAsync(TimeSpan.FromSeconds(20)));
        var failed = await peer.ReadResponseAsync(1);
        Assert.Equal("500", failed.Status);
        Assert.Null(failed.Headers["x-bad"]);
        await peer.SendRequestHeadersAsync(3, path: "/good");
        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
    }

    [Fact]
    public async Task Response_InvalidTrailer_StreamResetAndConnectionSurvives()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            if (exchange.RawTarget != "/bad")
            {
                return;
            }
            await exchange.ResponseBody.WriteAsync("body"u8.ToArray());
            exchange.ResponseTrailers.Add("grpc-message", "line\nbreak");
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/bad");

        // HEADERS and DATA may or may not leave before the reset overtakes them; the stream must end with RST_STREAM.
        Http2TestFrame frame;
        do
        {
            frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            Assert.Equal(1, frame.StreamId);
            Assert.False(frame.EndStream, "The stream must not end normally with an invalid trailer.");
        }
        while (frame.Type != Http2FrameType.RstStream);
        Assert.Equal(Http2ErrorCode.InternalError, frame.AsRstStream().ErrorCode);
        await peer.SendRequestHeadersAsync(3, path: "/good");
        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
    }
}

public class Http2ResponseBlockTests
{
    [Fact]
    public async Task StreamWrite_LargerThanTheLargestBlock_TakenInTheLargestBlocks()
    {
        // A 40 KiB write through Response.Body (WriteAsync): the stream pipe must take it in blocks asked for by what is
        // left, 16 + 16 + 4 + 4 KiB. PipeWriter's own WriteAsync asks for every block with no size hint: 40 blocks of
        // 1 KiB (the writer's no-hint size), or 160 of the pipe's 256-byte minimum without that.
        var pool = new CountingMemoryPool(maxBufferSize: 16 * 1024);
        var body = new byte[40 * 1024];
        Random.Shared.NextBytes(body);
        var options = new Http2Options { StreamMemoryPool = pool, StreamMinimumSegmentSize = 256 };
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            await exchange.ResponseBody.WriteAsync(body);
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(body, response.Body);
        Assert.Equal(body.Length, pool.RentedBytes);
        Assert.Equal(4, pool.Rents);
    }

    [Fact]
    public async Task WritesWithoutHint_FillOneSmallBlock_HintedSmallWriteTakesTheSmallest()
    {
        // 100 writes of 10 bytes, each asking for a span with no size hint (BuffersExtensions.Write): one 1 KiB
        // block, filled, not four blocks of the pipe's 256-byte minimum. Then a 30-byte write (asked for by its size, as
        // the relay writes an SSE event) that the block cannot hold: one 256-byte block.
        var pool = new CountingMemoryPool(maxBufferSize: 16 * 1024);
        var options = new Http2Options { StreamMemoryPool = pool, StreamMinimumSegmentSize = 256 };
        var rentedAfterSmallWrites = -1L;
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            var writer = exchange.ResponseBody;
            var ten = new byte[10];
            for (var i = 0; i < 100; i++)
            {
                writer.Write(ten); // BuffersExtensions.Write: GetSpan() with no hint, as much as it gives, again for the rest
            }
            await writer.FlushAsync();
            rentedAfterSmallWrites = pool.RentedBytes;
            await writer.WriteAsync(new byte[30]); // 24 bytes left in the block (or none, once sent): a new one
        }, options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal(1030, response.Body.Length);
        Assert.Equal(1024, rentedAfterSmallWrites);
        Assert.Equal(1, pool.SmallRents);
    }
}
