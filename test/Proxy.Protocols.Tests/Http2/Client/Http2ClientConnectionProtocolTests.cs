using System.IO.Pipelines;
using Microsoft.Extensions.Time.Testing;
using System.Buffers;
using System.Text;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http2;
using Proxy.Protocols.Http2.Client;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2.Client;

/// <summary>
/// The client connection against a scripted backend over an in-memory transport: the client role of RFC 9113 and
/// what a hostile or broken backend gets (the stream or connection error, a specific outcome for the relay).
/// </summary>
public sealed class Http2ClientConnectionProtocolTests
{
    private sealed class Harness : IAsyncDisposable
    {
        public Harness(Http2ClientOptions? options = null, TimeProvider? time = null)
        {
            var (server, client) = InMemoryDuplexPipe.CreatePair();
            Connection = new Http2ClientConnection(client, options, time);
            Run = Task.Run(() => Connection.RunAsync());
            Backend = Http2TestPeer.Over(server);
        }

        /// <summary>A connection whose read loop runs on <paramref name="loop"/> (as on our epoll engine), with its scheduler.</summary>
        public Harness(TestEventLoop loop)
        {
            var (server, client) = InMemoryDuplexPipe.CreatePair(
                PipeOptions.Default, new PipeOptions(readerScheduler: loop.PipeScheduler, useSynchronizationContext: false));
            Connection = new Http2ClientConnection(client, scheduler: loop.Scheduler);
            Run = loop.RunAsync(() => Connection.RunAsync()).Unwrap();
            Backend = Http2TestPeer.Over(server);
        }

        /// <summary>A connection whose writes toward the backend wait in a pipe of <paramref name="toBackend"/>'s thresholds.</summary>
        public Harness(PipeOptions toBackend)
        {
            var (server, client) = InMemoryDuplexPipe.CreatePair(toBackend, PipeOptions.Default);
            Connection = new Http2ClientConnection(client);
            Run = Task.Run(() => Connection.RunAsync());
            BackendTransport = server;
            Backend = Http2TestPeer.Over(server);
        }

        public Http2ClientConnection Connection { get; }
        public Task Run { get; }
        public Http2TestPeer Backend { get; }
        /// <summary>The backend's end of the transport (only with the <see cref="PipeOptions"/> constructor).</summary>
        public InMemoryDuplexPipe? BackendTransport { get; }

        /// <summary>
        /// The backend's side of the greeting, then a PING round trip: the client's read loop takes frames in order, so
        /// once it answers the PING it has applied the backend's SETTINGS (and its preface deadline is off).
        /// </summary>
        public async Task AcceptAsync(params Http2Setting[] settings)
        {
            await Backend.AcceptHandshakeAsync(settings);
            await Backend.SendPingAsync(0x5E77);
            Assert.Equal(0x5E77ul, (await Backend.ExpectPingAsync(ack: true)).OpaqueData);
        }

        public BackendExchange Open(string path = "/", bool hasBody = false) =>
            Connection.TryOpen(new BackendRequest { Method = hasBody ? "POST" : "GET", Authority = "backend", PathAndQuery = path, HasBody = hasBody })
            ?? throw new InvalidOperationException("The connection refused a new stream.");

        public async ValueTask DisposeAsync()
        {
            Connection.Abort();
            await Run.WaitAsync(TimeSpan.FromSeconds(10));
            await Backend.DisposeAsync();
        }
    }

    private static async Task<string> ReadAllAsync(BackendExchange exchange)
    {
        var text = new StringBuilder();
        while (true)
        {
            var result = await exchange.ResponseBody.ReadAsync();
            text.Append(Encoding.UTF8.GetString(result.Buffer.ToArray()));
            exchange.ResponseBody.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                return text.ToString();
            }
        }
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task ResponseHead_ContinuesOnTheEventLoop_OnlyWhenTheRequestAsks(bool continueOnEventLoop)
    {
        using var loop = new TestEventLoop();
        await using var h = new Harness(loop);
        await h.AcceptAsync();
        var exchange = h.Connection.TryOpen(new BackendRequest { Authority = "backend", PathAndQuery = "/", ContinueOnEventLoop = continueOnEventLoop })!;
        await h.Backend.ExpectHeadersAsync(1);

        var resumedOnLoop = ResumedOnLoopAsync();
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: true);

        Assert.Equal(continueOnEventLoop, await resumedOnLoop);
        Assert.Equal(200, exchange.StatusCode);
        Assert.Equal("", await ReadAllAsync(exchange));

        async Task<bool> ResumedOnLoopAsync()
        {
            await exchange.ReadResponseHeadAsync(CancellationToken.None).ConfigureAwait(false);
            return loop.IsCurrentThread;
        }
    }

    [Fact]
    public async Task ResponseHead_OnTheEventLoop_AFailureStillReachesTheWaiter()
    {
        using var loop = new TestEventLoop();
        await using var h = new Harness(loop);
        await h.AcceptAsync();
        var exchange = h.Connection.TryOpen(new BackendRequest { Authority = "backend", PathAndQuery = "/", ContinueOnEventLoop = true })!;
        await h.Backend.ExpectHeadersAsync(1);

        var head = exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask();
        await h.Backend.SendRstStreamAsync(1, Http2ErrorCode.InternalError);

        var error = await Assert.ThrowsAsync<BackendException>(() => head);
        Assert.Equal(BackendFailure.StreamReset, error.Failure);
        Assert.Equal((uint)Http2ErrorCode.InternalError, error.ErrorCode);
    }

    [Fact]
    public async Task Preface_ClientPrefaceThenSettings_PushDisabled()
    {
        await using var h = new Harness();
        var settings = await h.Backend.ExpectClientPrefaceAsync();
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.EnablePush && s.Value == 0);
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.InitialWindowSize && s.Value == 768 * 1024);
    }

    [Fact]
    public async Task Request_HeadersWithPseudoFieldsFirst_OddIdsInOrder()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var first = h.Open("/a?x=1");
        var second = h.Open("/b");
        var headers1 = await h.Backend.ExpectHeadersAsync(1);
        var headers3 = await h.Backend.ExpectHeadersAsync(3);
        Assert.Equal([":method", ":scheme", ":authority", ":path"], headers1.Fields.Take(4).Select(f => f.Key));
        Assert.Equal("/a?x=1", headers1[":path"]);
        Assert.Equal("backend", headers1[":authority"]);
        Assert.True(headers1.EndStream);
        Assert.Equal("/b", headers3[":path"]);
        await h.Backend.SendResponseHeadersAsync(1, 204, endStream: true);
        await first.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(204, first.StatusCode);
        Assert.Equal("", await ReadAllAsync(first));
        await second.DisposeAsync();
    }

    [Fact]
    public async Task GoAway_StreamsAboveLastId_RefusedAndRetryable_BelowComplete()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var kept = h.Open("/kept");
        var refused = h.Open("/refused");
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.ExpectHeadersAsync(3);
        await h.Backend.SendGoAwayAsync(1, Http2ErrorCode.NoError);
        var error = await Assert.ThrowsAsync<BackendException>(() => refused.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.Refused, error.Failure);
        Assert.False(h.Connection.IsOpen); // no new streams after GOAWAY
        Assert.Null(h.Connection.TryOpen(new BackendRequest { Authority = "backend" }));

        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: false);
        await h.Backend.SendDataAsync(1, "done"u8.ToArray(), endStream: true);
        await kept.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("done", await ReadAllAsync(kept));
        await h.Run.WaitAsync(TimeSpan.FromSeconds(10)); // the last stream finished: the connection closes
    }

    [Fact]
    public async Task RefusedStream_FailsAsRefused()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendRstStreamAsync(1, Http2ErrorCode.RefusedStream);
        var error = await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.Refused, error.Failure);
    }

    [Fact]
    public async Task KeepAlivePing_BackendSilent_ConnectionClosedStreamsLost()
    {
        var time = new FakeTimeProvider();
        var options = new Http2ClientOptions { KeepAlivePingDelay = TimeSpan.FromSeconds(10), KeepAlivePingTimeout = TimeSpan.FromSeconds(5) };
        await using var h = new Harness(options, time);
        await h.AcceptAsync();
        var exchange = h.Open("/slow");
        await h.Backend.ExpectHeadersAsync(1);
        time.Advance(TimeSpan.FromSeconds(10));
        var ping = await h.Backend.ExpectPingAsync(ack: false);
        time.Advance(TimeSpan.FromSeconds(5)); // no PING ACK: the backend is dead
        var error = await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.ConnectionLost, error.Failure);
        Assert.Contains("PING", error.Message);
        await h.Run.WaitAsync(TimeSpan.FromSeconds(10));
        _ = ping;
    }

    [Fact]
    public async Task KeepAlivePing_Answered_ConnectionStays()
    {
        var time = new FakeTimeProvider();
        var options = new Http2ClientOptions { KeepAlivePingDelay = TimeSpan.FromSeconds(10), KeepAlivePingTimeout = TimeSpan.FromSeconds(5) };
        await using var h = new Harness(options, time);
        await h.AcceptAsync();
        time.Advance(TimeSpan.FromSeconds(10));
        var ping = await h.Backend.ExpectPingAsync(ack: false);
        await h.Backend.SendPingAsync(ping.OpaqueData, ack: true);
        // Barrier: the read loop takes frames in order, so once it answers this PING it has seen the ACK above.
        await h.Backend.SendPingAsync(42);
        Assert.Equal(42ul, (await h.Backend.ExpectPingAsync(ack: true)).OpaqueData);
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        time.Advance(TimeSpan.FromSeconds(6));
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: true);
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.True(h.Connection.IsOpen);
    }

    [Theory]
    [InlineData("uppercase_name", "X-Upper", "1")]
    [InlineData("connection_specific", "connection", "close")]
    [InlineData("transfer_encoding", "transfer-encoding", "chunked")]
    [InlineData("value_with_lf", "x-bad", "a\nb")]
    public async Task MalformedResponse_StreamResetProtocolError_OtherStreamsCarryOn(string _, string name, string value)
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var bad = h.Open("/bad");
        var good = h.Open("/good");
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.ExpectHeadersAsync(3);
        var block = Http2TestPeer.EncodeHeadersRaw([new(":status", "200"), new(name, value)]);
        await h.Backend.SendHeaderBlockAsync(1, block, endStream: true, endHeaders: true);
        await h.Backend.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        var error = await Assert.ThrowsAsync<BackendException>(() => bad.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.ProtocolError, error.Failure);

        await h.Backend.SendResponseHeadersAsync(3, 200, endStream: false);
        await h.Backend.SendDataAsync(3, "ok"u8.ToArray(), endStream: true);
        await good.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("ok", await ReadAllAsync(good));
    }

    [Fact]
    public async Task MissingStatus_StreamResetProtocolError()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendHeadersAsync(1, [new("content-type", "text/plain")], endStream: true);
        await h.Backend.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        var error = await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.ProtocolError, error.Failure);
    }

    [Fact]
    public async Task DataBeyondContentLength_StreamResetProtocolError()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendResponseHeadersAsync(1, 200, false, ("content-length", "3"));
        await h.Backend.SendDataAsync(1, "12345"u8.ToArray(), endStream: true);
        await h.Backend.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var error = await Assert.ThrowsAsync<BackendException>(() => ReadAllAsync(exchange));
        Assert.Equal(BackendFailure.ProtocolError, error.Failure);
    }

    [Fact]
    public async Task PushPromise_ConnectionErrorProtocolError()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        var payload = new byte[4 + 1];
        payload[3] = 2; // promised stream 2
        await h.Backend.SendRawFrameAsync(Http2FrameType.PushPromise, Http2FrameFlags.EndHeaders, 1, payload);
        await h.Backend.ExpectGoAwayAsync(Http2ErrorCode.ProtocolError);
        var error = await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.ConnectionLost, error.Failure);
    }

    [Fact]
    public async Task EnablePushFromServer_ConnectionErrorProtocolError()
    {
        await using var h = new Harness();
        await h.Backend.ExpectClientPrefaceAsync();
        await h.Backend.SendSettingsAsync(new Http2Setting(Http2SettingsParameter.EnablePush, 1));
        await h.Backend.ExpectGoAwayAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task FirstFrameNotSettings_ConnectionErrorProtocolError()
    {
        await using var h = new Harness();
        await h.Backend.ExpectClientPrefaceAsync();
        await h.Backend.SendPingAsync(1);
        await h.Backend.ExpectGoAwayAsync(Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task ContinuationFlood_ConnectionErrorEnhanceYourCalm()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        var block = Http2TestPeer.EncodeHeadersRaw([new(":status", "200"), new("x-a", "b")]);
        await h.Backend.SendHeaderBlockAsync(1, block[..1], endStream: false, endHeaders: false);
        for (var i = 0; i < 9; i++)
        {
            await h.Backend.SendContinuationAsync(1, block[1..2], endHeaders: false);
        }
        await h.Backend.ExpectGoAwayAsync(Http2ErrorCode.EnhanceYourCalm);
        await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
    }

    [Fact]
    public async Task ResponseHeaderListTooLarge_StreamReset()
    {
        var options = new Http2ClientOptions();
        options.Protocol.MaxHeaderListSize = 1024;
        await using var h = new Harness(options);
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendResponseHeadersAsync(1, 200, true, ("x-big", new string('a', 1500)));
        await h.Backend.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        var error = await Assert.ThrowsAsync<BackendException>(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.ProtocolError, error.Failure);
    }

    [Fact]
    public async Task ResponseCredit_ReturnedOnlyAsTheRelayConsumes()
    {
        var options = new Http2ClientOptions();
        options.Protocol.InitialStreamWindowSize = 65_535;
        await using var h = new Harness(options);
        await h.AcceptAsync();
        var exchange = h.Open();
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: false);
        var chunk = new byte[16_384];
        for (var i = 0; i < 3; i++)
        {
            await h.Backend.SendDataAsync(1, chunk, endStream: false);
        }
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        // Nothing consumed yet: a PING round trip proves no stream WINDOW_UPDATE was sent meanwhile.
        await h.Backend.SendPingAsync(7);
        var beforeAck = new List<Http2TestFrame>();
        while (true)
        {
            var frame = await h.Backend.ReceiveFrameAsync();
            if (frame.Type == Http2FrameType.Ping && frame.IsAck)
            {
                break;
            }
            beforeAck.Add(frame);
        }
        Assert.DoesNotContain(beforeAck, f => f.Type == Http2FrameType.WindowUpdate && f.StreamId == 1);

        var read = await exchange.ResponseBody.ReadAsync();
        Assert.Equal(3 * 16_384, read.Buffer.Length);
        exchange.ResponseBody.AdvanceTo(read.Buffer.End);
        Http2TestFrame update;
        do
        {
            update = await h.Backend.ReceiveFrameAsync(); // the connection's own WINDOW_UPDATE may come first
        }
        while (update.Type != Http2FrameType.WindowUpdate || update.StreamId != 1);
        Assert.Equal(3 * 16_384, update.AsWindowUpdate().WindowSizeIncrement);
        exchange.Abort();
    }

    [Fact]
    public async Task MaxConcurrentStreams_FromBackendSettings_NoStreamBeyond()
    {
        await using var h = new Harness();
        await h.AcceptAsync(new Http2Setting(Http2SettingsParameter.MaxConcurrentStreams, 2));
        // The ACK of the backend's SETTINGS proves they were applied.
        var a = h.Open("/1");
        var b = h.Open("/2");
        Assert.Null(h.Connection.TryOpen(new BackendRequest { Authority = "backend" }));
        Assert.False(h.Connection.HasCapacity);
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: true);
        await a.ReadResponseHeadAsync(CancellationToken.None);
        await ReadAllAsync(a);
        await a.DisposeAsync();
        Assert.True(SpinWait.SpinUntil(() => h.Connection.HasCapacity, TimeSpan.FromSeconds(10)));
        await b.DisposeAsync();
    }

    [Fact]
    public async Task MaxConcurrentStreams_BackendAllowsThousands_OurCeilingApplies()
    {
        await using var h = new Harness();
        await h.AcceptAsync(new Http2Setting(Http2SettingsParameter.MaxConcurrentStreams, 1_000_000));
        // The writer's bounded queues are sized for MaxStreamsPerConnection (100): more streams go to another connection.
        Assert.Equal(100, h.Connection.MaxConcurrentStreams);
    }

    [Fact]
    public async Task Abort_SendsRstStreamCancel()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        var exchange = h.Open("/upload", hasBody: true);
        await h.Backend.ExpectHeadersAsync(1);
        exchange.Abort();
        await h.Backend.ExpectRstStreamAsync(1, Http2ErrorCode.Cancel);
    }

    [Fact]
    public async Task AbortBeforeHeadersWentOut_NoRstStreamForTheIdleStream()
    {
        await using var h = new Harness();
        await h.AcceptAsync();
        // The backend does not read for now: an upload fills the transport, so the writer waits in its flush and the
        // streams below are opened and aborted before it can write their HEADERS.
        var upload = h.Open("/upload", hasBody: true);
        _ = upload.RequestBody.WriteAsync(new byte[200_000]).AsTask();
        await h.Backend.ExpectHeadersAsync(1);
        for (var i = 0; i < 5; i++)
        {
            h.Open("/gone").Abort();
        }
        Assert.True(SpinWait.SpinUntil(() => h.Connection.ActiveStreams == 1, TimeSpan.FromSeconds(10)));
        var last = h.Open("/last");

        // RFC 9113 §6.4: RST_STREAM on a stream the backend never saw (idle) would be a connection error.
        var seenHeaders = new HashSet<int> { 1 };
        while (true)
        {
            var frame = await h.Backend.ReceiveSkippingWindowUpdatesAsync();
            if (frame.Type == Http2FrameType.Headers)
            {
                seenHeaders.Add(frame.StreamId);
                var headers = await h.Backend.DecodeHeaderBlockAsync(frame);
                if (headers[":path"] == "/last")
                {
                    await h.Backend.SendResponseHeadersAsync(frame.StreamId, 200, endStream: true);
                    break;
                }
            }
            else if (frame.Type == Http2FrameType.RstStream)
            {
                Assert.True(seenHeaders.Contains(frame.StreamId), $"RST_STREAM on stream {frame.StreamId}, whose HEADERS never went out.");
            }
            else if (frame.Type == Http2FrameType.Data && frame.StreamId == 1)
            {
                await h.Backend.SendWindowUpdateAsync(0, frame.Payload.Length); // keep the upload's connection credit flowing
            }
        }
        await last.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(200, last.StatusCode);
        Assert.True(h.Connection.IsOpen);
        upload.Abort();
    }

    [Fact]
    public async Task InvalidRequestField_RejectedBeforeAnythingIsQueued()
    {
        await using var h = new Harness();
        var request = new BackendRequest { Authority = "backend", PathAndQuery = "/a b" };
        Assert.Throws<ArgumentException>(() => h.Connection.TryOpen(request));
        var header = new BackendRequest { Authority = "backend" };
        header.Headers.Add(new("x-bad", "a\r\nb"));
        Assert.Throws<ArgumentException>(() => h.Connection.TryOpen(header));
        Assert.Equal(0, h.Connection.ActiveStreams);
    }

    // ---- Pooled streams ----

    /// <summary>
    /// A PING round trip from the backend: the read loop takes frames in order, so once it answers, it has finished
    /// with every frame sent before (a stream those closed is released by it).
    /// </summary>
    private static async Task ReadLoopCaughtUpAsync(Harness h, ulong payload)
    {
        await h.Backend.SendPingAsync(payload);
        Assert.Equal(payload, (await h.Backend.ExpectPingAsync(ack: true)).OpaqueData);
    }

    [Fact]
    public async Task Stream_ClosedNormally_IsReusedForTheNextRequest_WithNothingOfItsLastLife()
    {
        await using var h = new Harness();
        await h.AcceptAsync();

        // First life: a POST with a body, a response with headers, body and trailers.
        var first = h.Open("/first", hasBody: true);
        await first.RequestBody.WriteAsync(Encoding.ASCII.GetBytes("upload"));
        await first.RequestBody.CompleteAsync();
        Assert.Equal("/first", (await h.Backend.ExpectHeadersAsync(1))[":path"]);
        // The write's flush and the completion may leave as one DATA frame or as two (the second empty, with END_STREAM).
        var upload = new StringBuilder();
        Http2TestFrame data;
        do
        {
            data = await h.Backend.ExpectDataAsync(1);
            upload.Append(Encoding.ASCII.GetString(data.AsData().Data.ToArray()));
        }
        while (!data.EndStream);
        Assert.Equal("upload", upload.ToString());
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: false, ("content-type", "text/plain"), ("x-first", "1"));
        await h.Backend.SendDataAsync(1, Encoding.ASCII.GetBytes("one"), endStream: false);
        await h.Backend.SendHeadersAsync(1, [new("x-trailer", "t1")], endStream: true);
        await first.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("one", await ReadAllAsync(first));
        Assert.Equal("t1", first.ResponseTrailers.Get("x-trailer"));
        await first.DisposeAsync();
        await ReadLoopCaughtUpAsync(h, 1);
        Assert.Equal(1, h.Connection.SpareStreamCount);

        // Second life on the same object: a GET without a body, a response without trailers.
        var second = h.Open("/second");
        Assert.Same(first, second);
        Assert.Equal(0, h.Connection.SpareStreamCount);
        var head = await h.Backend.ExpectHeadersAsync(3);
        Assert.Equal("/second", head[":path"]);
        Assert.Equal("GET", head[":method"]);
        Assert.True(head.EndStream);
        Assert.Throws<InvalidOperationException>(() => second.RequestBody.GetSpan());
        await h.Backend.SendResponseHeadersAsync(3, 404, endStream: false, ("x-second", "2"));
        await h.Backend.SendDataAsync(3, Encoding.ASCII.GetBytes("two"), endStream: true);
        await second.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(404, second.StatusCode);
        Assert.Equal("2", second.ResponseHeaders.Get("x-second"));
        Assert.Null(second.ResponseHeaders.Get("x-first"));
        Assert.Null(second.ResponseHeaders.Get("content-type"));
        Assert.Equal("two", await ReadAllAsync(second));
        Assert.Empty(second.ResponseTrailers);
        await second.DisposeAsync();
        await ReadLoopCaughtUpAsync(h, 2);
        Assert.Equal(1, h.Connection.SpareStreamCount);
    }

    /// <summary>
    /// A reused stream keeps its last life's send state until the writer loop adopts the new life. A connection lost
    /// before that must report the new life Refused (its HEADERS never left: the relay retries it elsewhere), not
    /// ConnectionLost from the last life's HeadersSent (a 502 where a retry was owed). The writer is held in a flush the
    /// backend never reads.
    /// </summary>
    [Fact]
    public async Task ConnectionLost_BeforeTheWriterTookAReusedStream_TheNewLifeIsRefused()
    {
        // Every flush toward the backend waits until the backend has taken all of it.
        await using var h = new Harness(new PipeOptions(pauseWriterThreshold: 1, resumeWriterThreshold: 1, useSynchronizationContext: false));
        await h.AcceptAsync();

        var first = h.Open("/first");
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendResponseHeadersAsync(1, 200, endStream: true);
        await first.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("", await ReadAllAsync(first));
        await first.DisposeAsync();
        await ReadLoopCaughtUpAsync(h, 1);
        Assert.Equal(1, h.Connection.SpareStreamCount);

        // The writer answers a PING and stays in that flush. NOTE: the backend sees the bytes but examines none of them:
        // a reader that examined everything would let a paused writer go on (the pipe's guard against a reader that
        // needs more bytes to make progress).
        await h.Backend.SendPingAsync(2);
        var toBackend = h.BackendTransport!.Input;
        var pending = await toBackend.ReadAsync();
        Assert.False(pending.Buffer.IsEmpty);
        toBackend.AdvanceTo(pending.Buffer.Start);

        var second = h.Open("/second");
        Assert.Same(first, second); // the spare, its send state still its last life's
        var head = second.ReadResponseHeadAsync(CancellationToken.None).AsTask();
        h.Connection.Abort();

        var error = await Assert.ThrowsAsync<BackendException>(() => head.WaitAsync(TimeSpan.FromSeconds(30)));
        Assert.Equal(BackendFailure.Refused, error.Failure);
    }

    [Fact]
    public async Task Stream_Reset_Aborted_OrLeftEarly_IsNeverReused()
    {
        await using var h = new Harness();
        await h.AcceptAsync();

        // Reset by the backend.
        var reset = h.Open("/reset");
        await h.Backend.ExpectHeadersAsync(1);
        await h.Backend.SendRstStreamAsync(1, Http2ErrorCode.InternalError);
        await Assert.ThrowsAsync<BackendException>(() => reset.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        await reset.DisposeAsync();

        // Aborted by the relay after a complete response.
        var aborted = h.Open("/aborted");
        await h.Backend.ExpectHeadersAsync(3);
        await h.Backend.SendResponseHeadersAsync(3, 200, endStream: true);
        await aborted.ReadResponseHeadAsync(CancellationToken.None);
        aborted.Abort();
        await aborted.DisposeAsync();

        // Left before the response ended: DisposeAsync abandons it (RST_STREAM CANCEL).
        var left = h.Open("/left");
        await h.Backend.ExpectHeadersAsync(5);
        await h.Backend.SendResponseHeadersAsync(5, 200, endStream: false);
        await left.ReadResponseHeadAsync(CancellationToken.None);
        await left.DisposeAsync();
        await h.Backend.ExpectRstStreamAsync(5, Http2ErrorCode.Cancel);
        await h.Backend.SendDataAsync(5, Encoding.ASCII.GetBytes("late"), endStream: true);

        await ReadLoopCaughtUpAsync(h, 3);
        Assert.Equal(0, h.Connection.SpareStreamCount);
        var next = h.Open("/next");
        Assert.NotSame(reset, next);
        Assert.NotSame(aborted, next);
        Assert.NotSame(left, next);
    }
}
