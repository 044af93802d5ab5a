using System.Buffers;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http1.Client;

namespace Proxy.Protocols.Tests.Http1;

public class Http1ClientConnectionTests
{
    private static async Task<BackendException> ExpectFailureAsync(Func<Task> action) =>
        await Assert.ThrowsAsync<BackendException>(() => action().WaitAsync(Http1ClientHarness.Guard));

    // ---- Request head ----

    [Fact]
    public async Task SendAsync_Get_WritesHostFirstAndDropsConnectionSpecificFields()
    {
        await using var h = new Http1ClientHarness();
        var request = Http1ClientHarness.Get("/a/b?c=d", "backend.example:8080");
        request.Headers.Add(new("accept", "text/event-stream"));
        request.Headers.Add(new("connection", "x-secret"));
        request.Headers.Add(new("keep-alive", "timeout=5"));
        request.Headers.Add(new("proxy-connection", "keep-alive"));
        request.Headers.Add(new("transfer-encoding", "chunked"));
        request.Headers.Add(new("upgrade", "websocket"));
        request.Headers.Add(new("te", "trailers"));
        request.Headers.Add(new("host", "evil.example"));
        request.Headers.Add(new("content-length", "99"));
        request.Headers.Add(new("x-multi", "one"));
        request.Headers.Add(new("x-multi", "two"));

        await h.SendAsync(request);

        // Flushed at once: nothing waits for body bytes that a GET never sends. "TE: trailers" alone is kept (as HttpClient sends it).
        Assert.Equal(
            "GET /a/b?c=d HTTP/1.1\r\nhost: backend.example:8080\r\naccept: text/event-stream\r\nte: trailers\r\nx-multi: one\r\nx-multi: two\r\n\r\n",
            h.TakeWritten());
    }

    [Fact]
    public async Task SendAsync_TeOtherThanTrailers_Dropped()
    {
        await using var h = new Http1ClientHarness();
        var request = Http1ClientHarness.Get("/", "h");
        request.Headers.Add(new("te", "gzip, trailers"));
        await h.SendAsync(request);
        Assert.Equal("GET / HTTP/1.1\r\nhost: h\r\n\r\n", h.TakeWritten());
    }

    public static TheoryData<string, string, string, string, string> InvalidRequests => new()
    {
        // method, path, authority, header name, header value
        { "GE T", "/", "h", "x", "v" },
        { "", "/", "h", "x", "v" },
        { "GET\r\n", "/", "h", "x", "v" },
        { "GET", "", "h", "x", "v" },
        { "GET", "x", "h", "x", "v" },
        { "GET", "*", "h", "x", "v" },
        { "GET", "/a b", "h", "x", "v" },
        { "GET", "/a\tb", "h", "x", "v" },
        { "GET", "/caf\u00e9", "h", "x", "v" },
        { "GET", "/ HTTP/1.1\r\nx: y", "h", "x", "v" },
        { "GET", "/", "a b", "x", "v" },
        { "GET", "/", "user@h", "x", "v" },
        { "GET", "/", "h/x", "x", "v" },
        { "GET", "/", "h\r\nx: y", "x", "v" },
        { "GET", "/", "h", "bad name", "v" },
        { "GET", "/", "h", "x:y", "v" },
        { "GET", "/", "h", "", "v" },
        { "GET", "/", "h", "x", "a\r\nb" },
        { "GET", "/", "h", "x", "a\nb" },
        { "GET", "/", "h", "x", "a\0b" },
    };

    [Theory]
    [MemberData(nameof(InvalidRequests))]
    public async Task SendAsync_InvalidRequest_ThrowsBeforeWritingAnything(string method, string path, string authority, string name, string value)
    {
        await using var h = new Http1ClientHarness();
        var request = new BackendRequest { Method = method, PathAndQuery = path, Authority = authority };
        request.Headers.Add(new(name, value));

        await Assert.ThrowsAsync<ArgumentException>(() => h.SendAsync(request));

        Assert.Equal("", h.TakeWritten());
        Assert.True(h.Connection.IsReusable);
    }

    [Fact]
    public async Task SendAsync_InvalidAuthorityAfterAValidOne_StillThrowsBeforeWritingAnything()
    {
        // The connection skips checking the authority string it checked last time; another string is checked afresh.
        await using var h = new Http1ClientHarness();
        var authority = "backend.example";
        var first = await h.SendAsync(Http1ClientHarness.Get("/a", authority));
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        await first.ReadResponseHeadAsync(CancellationToken.None);
        await first.DisposeAsync();
        var second = await h.SendAsync(Http1ClientHarness.Get("/b", authority));
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        await second.ReadResponseHeadAsync(CancellationToken.None);
        await second.DisposeAsync();
        Assert.Equal("GET /a HTTP/1.1\r\nhost: backend.example\r\n\r\nGET /b HTTP/1.1\r\nhost: backend.example\r\n\r\n", h.TakeWritten());

        await Assert.ThrowsAsync<ArgumentException>(() => h.SendAsync(Http1ClientHarness.Get("/c", "user@backend.example")));

        Assert.Equal("", h.TakeWritten());
        Assert.True(h.Connection.IsReusable);
    }

    [Fact]
    public async Task SendAsync_ExchangeRunning_Throws()
    {
        await using var h = new Http1ClientHarness();
        await h.SendAsync(Http1ClientHarness.Get());
        await Assert.ThrowsAsync<InvalidOperationException>(() => h.SendAsync(Http1ClientHarness.Get()));
        Assert.False(h.Connection.IsReusable);
    }

    // ---- Request body ----

    [Fact]
    public async Task RequestBody_ContentLength_WrittenAsIsAndRequestComplete()
    {
        await using var h = new Http1ClientHarness();
        var request = new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/p", HasBody = true, ContentLength = 10 };
        var exchange = await h.SendAsync(request);
        Assert.Equal("POST /p HTTP/1.1\r\nhost: h\r\ncontent-length: 10\r\n\r\n", h.TakeWritten());

        await exchange.RequestBody.WriteAsync("hello"u8.ToArray());
        await exchange.RequestBody.WriteAsync("world"u8.ToArray());
        await exchange.RequestBody.CompleteAsync();
        Assert.Equal("helloworld", h.TakeWritten());

        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        await exchange.DisposeAsync();
        Assert.Equal([true], h.Released);
        Assert.True(h.Connection.IsReusable);
    }

    [Fact]
    public async Task RequestBody_HeadWaitsForBody_HeadAndBodyLeaveInOneFlush()
    {
        await using var h = new Http1ClientHarness();
        var request = new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/p", HasBody = true, ContentLength = 10, HeadWaitsForBody = true };
        var exchange = await h.SendAsync(request);

        // Nothing flushed yet: the relay's body flush carries the head (one socket write for a small POST, not two).
        Assert.Equal("", h.TakeWritten());

        exchange.RequestBody.Write("helloworld"u8);
        await exchange.RequestBody.FlushAsync();
        Assert.Equal("POST /p HTTP/1.1\r\nhost: h\r\ncontent-length: 10\r\n\r\nhelloworld", h.TakeWritten());

        await exchange.RequestBody.CompleteAsync();
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        await exchange.DisposeAsync();
        Assert.Equal([true], h.Released);
    }

    [Theory]
    [InlineData("POST", "POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n")]
    [InlineData("DELETE", "DELETE / HTTP/1.1\r\nhost: h\r\n\r\n")]
    public async Task SendAsync_NoBody_ContentLengthZeroOnlyWhereTheMethodExpectsContent(string method, string expected)
    {
        await using var h = new Http1ClientHarness();
        await h.SendAsync(new BackendRequest { Method = method, Authority = "h", PathAndQuery = "/" });
        Assert.Equal(expected, h.TakeWritten());
    }

    [Fact]
    public async Task RequestBody_ContentLengthExceeded_ThrowsAndConnectionNotReused()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "PUT", Authority = "h", PathAndQuery = "/", HasBody = true, ContentLength = 3 });

        Assert.Throws<InvalidOperationException>(() => exchange.RequestBody.Write("four"u8));

        var failure = await ExpectFailureAsync(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.Aborted, failure.Failure);
        await exchange.DisposeAsync();
        Assert.True(h.Connection.IsClosed);
    }

    [Fact]
    public async Task RequestBody_ContentLengthCompletedShort_AbortsConnection()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/", HasBody = true, ContentLength = 5 });
        await exchange.RequestBody.WriteAsync("abc"u8.ToArray());

        await exchange.RequestBody.CompleteAsync();

        var failure = await ExpectFailureAsync(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());
        Assert.Equal(BackendFailure.Aborted, failure.Failure);
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Fact]
    public async Task RequestBody_Chunked_OneChunkPerWriteAndLastChunk()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/", HasBody = true });
        Assert.Equal("POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n", h.TakeWritten());

        await exchange.RequestBody.WriteAsync("hello"u8.ToArray());
        var first = h.TakeWritten();
        await exchange.RequestBody.WriteAsync(Encoding.ASCII.GetBytes(new string('x', 300)));
        await exchange.RequestBody.CompleteAsync();
        var rest = h.TakeWritten();

        // The chunk-size is zero-padded to the width reserved in front of the data; the decoder reads it back.
        Assert.Matches("^0*5\r\nhello\r\n$", first);
        Assert.Matches("^0*12c\r\nx{300}\r\n0\r\n\r\n$", rest);
        Assert.Equal("hello" + new string('x', 300), DecodeChunked(first + rest));
    }

    [Fact]
    public async Task RequestBody_ResponseEndsFirst_FlushReportsCompletedAndConnectionNotReused()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/upload", HasBody = true });
        await exchange.RequestBody.WriteAsync("part"u8.ToArray());

        await h.RespondAsync("HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\n\r\nbig");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(413, exchange.StatusCode);
        Assert.Equal("big", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));

        var flush = await exchange.RequestBody.WriteAsync("more"u8.ToArray());
        Assert.True(flush.IsCompleted);
        await exchange.RequestBody.CompleteAsync();
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Fact]
    public async Task RequestBody_BackendAnswersAndStopsReading_WriteFailsButResponseStillRead()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/", HasBody = true, ContentLength = 100 });
        await h.RespondAsync("HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno");
        h.ToBackend.Reader.Complete();

        var write = await Assert.ThrowsAsync<BackendException>(() => exchange.RequestBody.WriteAsync(new byte[10]).AsTask());
        Assert.Equal(BackendFailure.ConnectionLost, write.Failure);

        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(403, exchange.StatusCode);
        Assert.Equal("no", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
    }

    // ---- Response framing ----

    [Fact]
    public async Task Response_ContentLength_HeadersLowercasedAndBodyRead()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Custom: A b\r\nContent-Length: 11\r\n\r\nhello world");

        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        Assert.Equal(200, exchange.StatusCode);
        Assert.Equal(
            [new("content-type", "text/plain"), new("x-custom", "A b"), new("content-length", "11")],
            exchange.ResponseHeaders);
        Assert.Equal("hello world", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
    }

    [Fact]
    public async Task Response_ConnectionSpecificFields_DroppedWithTheFieldsConnectionNames()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nConnection: X-Hop, keep-alive\r\n"
            + "Proxy-Connection: close\r\nUpgrade: h2c\r\nTE: trailers\r\nX-End: 2\r\nContent-Length: 0\r\n\r\n");

        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        Assert.Equal([new("x-end", "2"), new("content-length", "0")], exchange.ResponseHeaders);
    }

    [Fact]
    public async Task Response_Chunked_BodyDecodedAndTrailersCollected()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: grpc-status\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.DoesNotContain(exchange.ResponseHeaders, f => f.Key == "transfer-encoding");

        var reading = Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody);
        await h.RespondAsync("0\r\nGrpc-Status: 0\r\nGrpc-Message: ok\r\n\r\n");

        Assert.Equal("hello world", await reading);
        Assert.Equal([new("grpc-status", "0"), new("grpc-message", "ok")], exchange.ResponseTrailers);
        await exchange.DisposeAsync();
        Assert.Equal([true], h.Released);
    }

    [Fact]
    public async Task ResponseBody_BytesArrive_ReadBeforeTheBodyEnds()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get("/events"));
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        await h.RespondAsync("d\r\ndata: first\n\n\r\n");
        var first = await body.ReadAsync().AsTask().WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("data: first\n\n", Encoding.ASCII.GetString(first.Buffer.ToArray()));
        Assert.False(first.IsCompleted);
        body.AdvanceTo(first.Buffer.End);

        var pending = body.ReadAsync().AsTask();
        await Task.Yield();
        Assert.False(pending.IsCompleted);
        await h.RespondAsync("e\r\ndata: second\n\n\r\n");
        var second = await pending.WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("data: second\n\n", Encoding.ASCII.GetString(second.Buffer.ToArray()));
        body.AdvanceTo(second.Buffer.End);
    }

    [Fact]
    public async Task ResponseBody_BytesAlreadyBuffered_ReadsCompleteWithoutWaiting()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        // The body came with its head: the read hands it over in place, as the relay's pump expects of a small body.
        var read = body.ReadAsync();
        Assert.True(read.IsCompletedSuccessfully);
        var result = await read;
        Assert.Equal("hello", Encoding.ASCII.GetString(result.Buffer.ToArray()));
        Assert.True(result.IsCompleted);
        body.AdvanceTo(result.Buffer.End);
        await exchange.DisposeAsync();

        var next = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3\r\nyou\r\n0\r\n\r\n");
        await next.ReadResponseHeadAsync(CancellationToken.None);
        body = next.ResponseBody;
        foreach (var expected in new[] { "hi", "you" })
        {
            read = body.ReadAsync();
            Assert.True(read.IsCompletedSuccessfully);
            result = await read;
            Assert.Equal(expected, Encoding.ASCII.GetString(result.Buffer.ToArray()));
            body.AdvanceTo(result.Buffer.End);
        }
        read = body.ReadAsync();
        Assert.True(read.IsCompletedSuccessfully);
        Assert.True((await read).IsCompleted);
        await next.DisposeAsync();
        Assert.Equal([true, true], h.Released);
    }

    [Fact]
    public async Task ResponseBody_TryRead_HandsOverWhatIsBuffered()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        // Part of the body: handed over, not complete. A peek (nothing consumed) leaves it for the next read.
        Assert.True(body.TryRead(out var part));
        Assert.Equal("hel", Encoding.ASCII.GetString(part.Buffer.ToArray()));
        Assert.False(part.IsCompleted);
        body.AdvanceTo(part.Buffer.Start, part.Buffer.End);
        Assert.False(body.TryRead(out _)); // everything buffered was examined: nothing new yet

        // The rest arrives: the whole body in one result, complete (the relay copies such a body without its pump).
        await h.RespondAsync("lo");
        var whole = await body.ReadAsync().AsTask().WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("hello", Encoding.ASCII.GetString(whole.Buffer.ToArray()));
        Assert.True(whole.IsCompleted);
        body.AdvanceTo(whole.Buffer.Start);
        Assert.True(body.TryRead(out var again));
        Assert.Equal("hello", Encoding.ASCII.GetString(again.Buffer.ToArray()));
        Assert.True(again.IsCompleted);
        Assert.Throws<InvalidOperationException>(() => body.TryRead(out _)); // AdvanceTo first
        body.AdvanceTo(again.Buffer.End);
        Assert.True(body.TryRead(out var end) && end.IsCompleted && end.Buffer.IsEmpty);
        await exchange.DisposeAsync();

        // Chunked: the first chunk's data, not complete; a chunk-size line cut short is no result.
        var next = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3");
        await next.ReadResponseHeadAsync(CancellationToken.None);
        body = next.ResponseBody;
        Assert.True(body.TryRead(out var chunk));
        Assert.Equal("hi", Encoding.ASCII.GetString(chunk.Buffer.ToArray()));
        Assert.False(chunk.IsCompleted);
        body.AdvanceTo(chunk.Buffer.End);
        Assert.False(body.TryRead(out _));
        await h.RespondAsync("\r\nyou\r\n0\r\n\r\n");
        var rest = await body.ReadAsync().AsTask().WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("you", Encoding.ASCII.GetString(rest.Buffer.ToArray()));
        body.AdvanceTo(rest.Buffer.End);
        Assert.True((await body.ReadAsync()).IsCompleted);
        await next.DisposeAsync();
        Assert.Equal([true, true], h.Released);
    }

    [Fact]
    public async Task ResponseBody_ChunkSizeLineCutShort_ReadWaitsForTheRest()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        // The buffered bytes hold no data yet: the read waits for more instead of handing out nothing or the same bytes.
        var pending = body.ReadAsync().AsTask();
        await Task.Yield();
        Assert.False(pending.IsCompleted);
        await h.RespondAsync("\n0123456789\r\n0\r\n\r\n");

        var data = await pending.WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("0123456789", Encoding.ASCII.GetString(data.Buffer.ToArray()));
        body.AdvanceTo(data.Buffer.End);
        Assert.True((await body.ReadAsync()).IsCompleted);
    }

    [Fact]
    public async Task ResponseBody_PartiallyConsumed_RestReturnedNext()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        var first = await body.ReadAsync();
        body.AdvanceTo(first.Buffer.GetPosition(4));
        var second = await body.ReadAsync();

        Assert.Equal("456789", Encoding.ASCII.GetString(second.Buffer.ToArray()));
        body.AdvanceTo(second.Buffer.End);
        Assert.True((await body.ReadAsync()).IsCompleted);
    }

    [Fact]
    public async Task ResponseBody_ExaminedWithoutConsuming_NextChunksJoinedBehindIt()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1\r\n \r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        // A reader waiting for a whole message: it examines everything and consumes nothing.
        var first = await body.ReadAsync();
        Assert.Equal("hello", Encoding.ASCII.GetString(first.Buffer.ToArray()));
        body.AdvanceTo(first.Buffer.Start, first.Buffer.End);
        var joined = await body.ReadAsync().AsTask().WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("hello ", Encoding.ASCII.GetString(joined.Buffer.ToArray()));
        body.AdvanceTo(joined.Buffer.Start, joined.Buffer.End);

        // Nothing new yet: the read waits for the next chunk instead of returning the same bytes again.
        var pending = body.ReadAsync().AsTask();
        await Task.Yield();
        Assert.False(pending.IsCompleted);
        await h.RespondAsync("5\r\nworld\r\n0\r\n\r\n");
        var all = await pending.WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("hello world", Encoding.ASCII.GetString(all.Buffer.ToArray()));
        Assert.True(all.IsCompleted);
        body.AdvanceTo(all.Buffer.GetPosition(6));
        var rest = await body.ReadAsync();
        Assert.Equal("world", Encoding.ASCII.GetString(rest.Buffer.ToArray()));
        body.AdvanceTo(rest.Buffer.End);
        Assert.True((await body.ReadAsync()).IsCompleted);

        await exchange.DisposeAsync();
        Assert.Equal([true], h.Released);
    }

    [Fact]
    public async Task ResponseBody_ExaminedWithoutConsumingInsideAChunk_NewBytesExtendTheSlice()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n01234");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var body = exchange.ResponseBody;

        var first = await body.ReadAsync();
        Assert.Equal("01234", Encoding.ASCII.GetString(first.Buffer.ToArray()));
        body.AdvanceTo(first.Buffer.Start, first.Buffer.End);
        var pending = body.ReadAsync().AsTask();
        await Task.Yield();
        Assert.False(pending.IsCompleted);

        await h.RespondAsync("56789\r\n0\r\n\r\n");

        var whole = await pending.WaitAsync(Http1ClientHarness.Guard);
        Assert.Equal("0123456789", Encoding.ASCII.GetString(whole.Buffer.ToArray()));
        body.AdvanceTo(whole.Buffer.End);
        Assert.True((await body.ReadAsync()).IsCompleted);
    }

    [Fact]
    public async Task Response_UntilClose_BodyEndsAtCloseAndNotReused()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of ");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        var reading = Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody);
        await h.RespondAsync("it");
        h.CloseBackend();

        Assert.Equal("all of it", await reading);
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Theory]
    [InlineData("HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")]
    [InlineData("GET", "HTTP/1.1 204 No Content\r\n\r\n")]
    [InlineData("GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n")]
    public async Task Response_NoBody_EmptyBodyAndConnectionReused(string method, string response)
    {
        await using var h = new Http1ClientHarness();
        var request = Http1ClientHarness.Get();
        request.Method = method;
        var exchange = await h.SendAsync(request);
        await h.RespondAsync(response);

        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        Assert.Equal("", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
        await exchange.DisposeAsync();
        Assert.Equal([true], h.Released);

        // The next response starts right after the head: nothing was read as a body.
        var next = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        await next.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("ok", await Http1ClientHarness.ReadToEndAsync(next.ResponseBody));
    }

    [Fact]
    public async Task Response_InterimResponses_SkippedAndTheirFieldsDropped()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
            + "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");

        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        Assert.Equal(201, exchange.StatusCode);
        Assert.Equal([new("content-length", "2")], exchange.ResponseHeaders);
        Assert.Equal("ok", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
    }

    [Fact]
    public async Task Response_EndlessInterimResponses_ProtocolError()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync(string.Concat(Enumerable.Repeat("HTTP/1.1 102 Processing\r\n\r\n", Http1ClientExchange.MaxInterimResponses + 1)));

        var failure = await ExpectFailureAsync(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());

        Assert.Equal(BackendFailure.ProtocolError, failure.Failure);
    }

    // ---- Keep-alive ----

    [Fact]
    public async Task Connection_TwoExchanges_SameConnectionReused()
    {
        await using var h = new Http1ClientHarness();
        for (var i = 0; i < 2; i++)
        {
            Assert.True(h.Connection.IsReusable);
            var exchange = await h.SendAsync(Http1ClientHarness.Get($"/{i}"));
            Assert.Equal($"GET /{i} HTTP/1.1\r\nhost: backend.example\r\n\r\n", h.TakeWritten());
            await h.RespondAsync($"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{i}");
            await exchange.ReadResponseHeadAsync(CancellationToken.None);
            Assert.Equal($"{i}", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
            await exchange.DisposeAsync();
        }
        Assert.Equal([true, true], h.Released);
        Assert.True(h.Connection.IsReusable);
    }

    [Fact]
    public async Task Connection_CleanExchanges_ExchangeReusedWithNothingOfTheLastRequestLeft()
    {
        await using var h = new Http1ClientHarness();

        // 1: a chunked POST answered with a chunked body and trailers.
        var post = new BackendRequest { Method = "POST", Authority = "backend.example", PathAndQuery = "/up", HasBody = true };
        var first = await h.SendAsync(post);
        await first.RequestBody.WriteAsync("abc"u8.ToArray());
        await first.RequestBody.CompleteAsync();
        Assert.EndsWith("3\r\nabc\r\n0\r\n\r\n", await h.ReadWrittenUntilAsync("0\r\n\r\n"));
        await h.RespondAsync("HTTP/1.1 201 Created\r\nX-First: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: t\r\n\r\n");
        await first.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("ok", await Http1ClientHarness.ReadToEndAsync(first.ResponseBody));
        Assert.Equal("t", first.ResponseTrailers.Get("x-trailer"));
        await first.DisposeAsync();

        // 2: a GET with a body of declared length: the same exchange, as new (status, fields, trailers, framing).
        var second = await h.SendAsync(Http1ClientHarness.Get("/next"));
        Assert.Same(first, second);
        Assert.Equal("GET /next HTTP/1.1\r\nhost: backend.example\r\n\r\n", h.TakeWritten());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody");
        await second.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal(200, second.StatusCode);
        Assert.Null(second.ResponseHeaders.Get("x-first"));
        Assert.Equal("4", second.ResponseHeaders.Get("content-length"));
        Assert.Equal("body", await Http1ClientHarness.ReadToEndAsync(second.ResponseBody));
        Assert.Empty(second.ResponseTrailers);
        await second.DisposeAsync();

        // 3: a HEAD, whose Content-Length announces no body, then a body of declared length on the wire for a request of
        // declared length: the reused writer counts this request's bytes, not the last one's.
        var head = await h.SendAsync(new BackendRequest { Method = "HEAD", Authority = "backend.example", PathAndQuery = "/h" });
        Assert.Same(first, head);
        h.TakeWritten();
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n");
        await head.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("", await Http1ClientHarness.ReadToEndAsync(head.ResponseBody));
        await head.DisposeAsync();

        var put = await h.SendAsync(new BackendRequest { Method = "PUT", Authority = "backend.example", PathAndQuery = "/p", HasBody = true, ContentLength = 2 });
        Assert.Same(first, put);
        Assert.Throws<InvalidOperationException>(() => { put.RequestBody.Write("xyz"u8); }); // 3 > 2: this request's length
        await put.DisposeAsync(); // the overlong body aborted it: the connection closes
        Assert.Equal([true, true, true, false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Fact]
    public async Task Connection_AfterAFailedExchange_NothingIsReused()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("ok", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));
        exchange.Abort(); // the relay gave up on it after all: the connection closes and the exchange is dropped
        await exchange.DisposeAsync();

        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
        await Assert.ThrowsAsync<InvalidOperationException>(() => h.SendAsync(Http1ClientHarness.Get()));
    }

    [Fact]
    public async Task Connection_NextResponseRepeatsAValue_EqualValueAndChangedValueRead()
    {
        // Which strings are reused is the field sink's (Http1ResponseFieldSinkTests: per thread, so not checked here, where
        // the two heads may be parsed on two threads); here, that a repeated and a changed value both come out right.
        await using var h = new Http1ClientHarness();
        var heads = new List<KeyValuePair<string, string>[]>();
        foreach (var (date, tag) in new[] { ("Mon, 23 Nov 2026 17:00:00 GMT", "a"), ("Mon, 23 Nov 2026 17:00:00 GMT", "b") })
        {
            var exchange = await h.SendAsync(Http1ClientHarness.Get());
            await h.RespondAsync($"HTTP/1.1 200 OK\r\nDate: {date}\r\nX-Tag: {tag}\r\nContent-Length: 0\r\n\r\n");
            await exchange.ReadResponseHeadAsync(CancellationToken.None);
            heads.Add([.. exchange.ResponseHeaders]); // the list is the exchange's, reused by the next one after dispose
            await exchange.DisposeAsync();
        }

        Assert.Equal([("date", "Mon, 23 Nov 2026 17:00:00 GMT"), ("x-tag", "a"), ("content-length", "0")], heads[0].Select(f => (f.Key, f.Value)));
        Assert.Equal([("date", "Mon, 23 Nov 2026 17:00:00 GMT"), ("x-tag", "b"), ("content-length", "0")], heads[1].Select(f => (f.Key, f.Value)));
    }

    [Fact]
    public async Task Connection_NextResponseNamesFieldsInAnotherCaseOrOrder_NamesLowercaseAndValuesRead()
    {
        await using var h = new Http1ClientHarness();
        var responses = new[]
        {
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Tag: a\r\nContent-Length: 0\r\n\r\n",
            // The same names in another case; a connection-specific field where the previous response had X-Tag.
            "HTTP/1.1 200 OK\r\nCONTENT-TYPE: text/plain\r\nKeep-Alive: timeout=5\r\nx-tag: b\r\ncontent-length: 0\r\n\r\n",
            // Another order: every field at a position the previous response gave another name.
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Tag: c\r\nContent-Type: text/html\r\n\r\n",
        };
        var seen = new List<string>();
        foreach (var response in responses)
        {
            var exchange = await h.SendAsync(Http1ClientHarness.Get());
            await h.RespondAsync(response);
            await exchange.ReadResponseHeadAsync(CancellationToken.None);
            seen.Add(string.Join(",", exchange.ResponseHeaders.Select(f => f.Key + "=" + f.Value)));
            await exchange.DisposeAsync();
        }

        Assert.Equal(
        [
            "content-type=text/plain,x-tag=a,content-length=0",
            "content-type=text/plain,x-tag=b,content-length=0",
            "content-length=0,x-tag=c,content-type=text/html",
        ], seen);
    }

    [Theory]
    [InlineData("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")]
    [InlineData("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")]
    public async Task Connection_CloseOrHttp10_NotReused(string response)
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync(response);
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        Assert.Equal("ok", await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));

        await exchange.DisposeAsync();

        Assert.Equal([false], h.Released);
        Assert.False(h.Connection.IsReusable);
        Assert.True(h.Connection.IsClosed);
        await Assert.ThrowsAsync<InvalidOperationException>(() => h.SendAsync(Http1ClientHarness.Get()));
    }

    [Fact]
    public async Task Connection_BodyNotReadToEnd_NotReused()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        exchange.ResponseBody.Complete();

        await exchange.DisposeAsync();

        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    // ---- Invalid responses: ProtocolError, never reused ----

    [Theory]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")]
    [InlineData("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx")]
    [InlineData("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxx")]
    [InlineData("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length: 0\nX: y\r\n\r\n")]
    [InlineData("HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n")]
    [InlineData("HTTP/1.1 200 OK\r\nX: a\0b\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n")]
    public async Task Response_InvalidHead_ProtocolErrorAndNotReused(string response)
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync(response);

        var failure = await ExpectFailureAsync(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());

        Assert.Equal(BackendFailure.ProtocolError, failure.Failure);
        Assert.False(string.IsNullOrWhiteSpace(failure.Message));
        await Assert.ThrowsAsync<BackendException>(() => exchange.ResponseBody.ReadAsync().AsTask());
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Theory]
    [InlineData("5\r\nhelloX\r\n0\r\n\r\n")]                // data longer than its size
    [InlineData("5\nhello\r\n0\r\n\r\n")]                   // bare LF after the size
    [InlineData("fffffffffffffffff\r\n")]                   // chunk-size overflow
    [InlineData("zz\r\n")]                                  // not hex
    [InlineData("0\r\nX : y\r\n\r\n")]                      // malformed trailer
    public async Task ResponseBody_InvalidChunkedFraming_ProtocolErrorAndNotReused(string body)
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        var failure = await ExpectFailureAsync(() => Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody));

        Assert.Equal(BackendFailure.ProtocolError, failure.Failure);
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
    }

    // ---- Connection lost, abort, cancellation ----

    [Theory]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")]
    [InlineData("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhello")]
    [InlineData("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")]
    public async Task ResponseBody_BackendClosesMidBody_ConnectionLost(string response)
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync(response);
        await exchange.ReadResponseHeadAsync(CancellationToken.None);

        var reading = Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody);
        h.CloseBackend();

        var failure = await ExpectFailureAsync(() => reading);
        Assert.Equal(BackendFailure.ConnectionLost, failure.Failure);
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
    }

    [Theory]
    [InlineData("")]
    [InlineData("HTTP/1.1 200 OK\r\nContent-")]
    public async Task ReadResponseHeadAsync_BackendClosesBeforeHead_ConnectionLost(string partial)
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        await h.RespondAsync(partial);
        h.CloseBackend();

        var failure = await ExpectFailureAsync(() => exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask());

        Assert.Equal(BackendFailure.ConnectionLost, failure.Failure);
    }

    [Fact]
    public async Task Abort_PendingHeadRead_FailsWithAborted()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        var reading = exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask();
        await Task.Yield();
        Assert.False(reading.IsCompleted);

        exchange.Abort();

        var failure = await ExpectFailureAsync(() => reading);
        Assert.Equal(BackendFailure.Aborted, failure.Failure);
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
        Assert.True(h.Connection.IsClosed);
    }

    [Fact]
    public async Task Abort_PendingBodyReadAndWrites_FailWithAborted()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(new BackendRequest { Method = "POST", Authority = "h", PathAndQuery = "/", HasBody = true });
        await h.RespondAsync("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        await exchange.ReadResponseHeadAsync(CancellationToken.None);
        var reading = exchange.ResponseBody.ReadAsync().AsTask();
        await Task.Yield();
        Assert.False(reading.IsCompleted);

        exchange.Abort();

        Assert.Equal(BackendFailure.Aborted, (await ExpectFailureAsync(() => reading)).Failure);
        var write = await Assert.ThrowsAsync<BackendException>(() => exchange.RequestBody.WriteAsync("x"u8.ToArray()).AsTask());
        Assert.Equal(BackendFailure.Aborted, write.Failure);
        await exchange.DisposeAsync();
        Assert.True(h.Connection.IsClosed);
        // Closing completed the transport: the backend sees the end of the request stream.
        Assert.True((await h.ToBackend.Reader.ReadAsync()).IsCompleted);
    }

    [Fact]
    public async Task ReadResponseHeadAsync_Canceled_ThrowsOperationCanceledAndAborts()
    {
        await using var h = new Http1ClientHarness();
        var exchange = await h.SendAsync(Http1ClientHarness.Get());
        using var cts = new CancellationTokenSource();
        var reading = exchange.ReadResponseHeadAsync(cts.Token).AsTask();

        cts.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => reading.WaitAsync(Http1ClientHarness.Guard));
        await exchange.DisposeAsync();
        Assert.Equal([false], h.Released);
    }

    private static string DecodeChunked(string wire)
    {
        var decoder = new Http1ChunkedDecoder(Http1ParserLimits.Default);
        var reader = new SequenceReader<byte>(new ReadOnlySequence<byte>(Encoding.Latin1.GetBytes(wire)));
        var body = new StringBuilder();
        while (!decoder.IsComplete)
        {
            Assert.True(decoder.TryRead(ref reader, null, out var data));
            body.Append(Encoding.Latin1.GetString(data.ToArray()));
        }
        Assert.True(reader.End);
        return body.ToString();
    }
}
