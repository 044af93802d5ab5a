using System.Buffers;
using System.IO.Pipelines;
using System.Text;
using Proxy.Protocols.Http1;

namespace Proxy.Protocols.Tests.Http1;

public class Http1ConnectionTests
{
    private static Task Echo(HttpExchange exchange) => EchoAsync(exchange);

    private static async Task EchoAsync(HttpExchange exchange)
    {
        var body = await exchange.ReadBodyAsync();
        var text = $"{exchange.Method} {exchange.RawTarget} {exchange.Protocol} {exchange.Authority} [{body}]";
        exchange.ResponseHeaders.Add("Content-Length", Encoding.Latin1.GetByteCount(text).ToString());
        await exchange.WriteAsync(text);
    }

    [Fact]
    public async Task Get_Simple_200WithContentLengthBody()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync("GET /a?b=c HTTP/1.1\r\nHost: example.com\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(200, r.Status);
        Assert.Equal("OK", r.Reason);
        Assert.Equal("GET /a?b=c HTTP/1.1 example.com []", r.Body);
        Assert.Null(r.Header("Connection"));
        Assert.Null(r.Header("Transfer-Encoding"));
    }

    [Fact]
    public async Task Get_HandlerWritesNothing_ContentLengthZero()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask);
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(200, r.Status);
        Assert.Equal("0", r.Header("Content-Length"));
    }

    [Fact]
    public async Task StartResponse_CommitsWithoutSending_HeadLeavesWithTheFirstFlush()
    {
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var write = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Length", "5");
            await e.StartResponseAsync();
            Assert.True(e.HasResponseStarted);
            started.SetResult();
            await write.Task;
            await e.WriteAsync("hello");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        await started.Task.WaitAsync(TimeSpan.FromSeconds(10));

        // Committed, not sent: nothing was flushed to the client (as Kestrel's HTTP/1.1 StartAsync).
        Assert.False(h.ToClient.Reader.TryRead(out _));

        write.SetResult();
        var read = await h.ToClient.Reader.ReadAsync().AsTask().WaitAsync(TimeSpan.FromSeconds(10));
        var text = Encoding.Latin1.GetString(read.Buffer.ToArray());
        h.ToClient.Reader.AdvanceTo(read.Buffer.Start); // leave it for nobody: the test reads no more

        // One flush carried the head and the body.
        Assert.StartsWith("HTTP/1.1 200 OK\r\n", text);
        Assert.EndsWith("\r\n\r\nhello", text);
    }

    [Fact]
    public async Task Get_AbsoluteFormTarget_AuthorityFromTargetNotHost()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync("GET http://target.example:81/p?q HTTP/1.1\r\nHost: TARGET.example:81\r\n\r\n");

        Assert.Equal("GET /p?q HTTP/1.1 target.example:81 []", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task Post_ContentLength_BodyDelivered()
    {
        (long? Length, bool HasBody)? seen = null;
        // Read inside the handler: the connection reuses the exchange for its next request.
        await using var h = new Http1Harness(e => { seen = (e.RequestContentLength, e.RequestHasBody); return Echo(e); });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello");
        await h.SendAsync(" world");

        var r = await h.ReadResponseAsync();

        Assert.Equal("POST /p HTTP/1.1 h [hello world]", r.Body);
        Assert.Equal((11L, true), seen);
    }

    [Fact]
    public async Task Post_Chunked_BodyAndTrailersDelivered()
    {
        string? trailer = null;
        await using var h = new Http1Harness(async e =>
        {
            await Echo(e);
            trailer = e.RequestTrailers.Get("X-Sum");
            Assert.True(((Http1RequestBody)e.RequestBody).UsedInnerPipe); // chunk boundaries: decoded into the inner pipe
        });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n");
        await h.SendAsync("6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal("POST / HTTP/1.1 h [hello world]", r.Body);
        Assert.Equal("11", trailer);
    }

    [Fact]
    public async Task Pipelined_ThreeRequestsInOneWrite_AnsweredInOrder()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync(
            "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n" +
            "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc" +
            "GET /3 HTTP/1.1\r\nHost: h\r\n\r\n");

        Assert.Equal("GET /1 HTTP/1.1 h []", (await h.ReadResponseAsync()).Body);
        Assert.Equal("POST /2 HTTP/1.1 h [abc]", (await h.ReadResponseAsync()).Body);
        Assert.Equal("GET /3 HTTP/1.1 h []", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task KeepAlive_SequentialRequests_ServedOnOneConnection()
    {
        var count = 0;
        await using var h = new Http1Harness(e => { count++; return Echo(e); });
        for (var i = 0; i < 5; i++)
        {
            await h.SendAsync($"GET /{i} HTTP/1.1\r\nHost: h\r\n\r\n");
            Assert.Equal($"GET /{i} HTTP/1.1 h []", (await h.ReadResponseAsync()).Body);
        }
        Assert.Equal(5, count);
        Assert.False(h.Processing.IsCompleted);
    }

    [Fact]
    public async Task ConnectionClose_FromClient_ResponseSaysCloseAndConnectionEnds()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /ignored HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal("close", r.Header("Connection"));
        Assert.Equal("", await h.ReadToEndAsync());
        await h.Processing.WaitAsync(TimeSpan.FromSeconds(10));
    }

    [Fact]
    public async Task ConnectionClose_FromApp_ResponseSaysCloseAndConnectionEnds()
    {
        await using var h = new Http1Harness(e => { e.ResponseHeaders.Add("Connection", "close"); return Task.CompletedTask; });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(new[] { "close" }, r.Headers.Where(x => x.Name == "Connection").Select(x => x.Value));
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task Http10_NoContentLength_BodyEndsWithClose()
    {
        await using var h = new Http1Harness(async e => { await e.WriteAsync("old "); await e.WriteAsync("school"); });
        await h.SendAsync("GET / HTTP/1.0\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Null(r.Header("Transfer-Encoding"));
        Assert.Equal("close", r.Header("Connection"));
        Assert.Equal("old school", r.Body);
    }

    [Fact]
    public async Task Http10_KeepAliveWithContentLength_ConnectionKept()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync("GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        var r = await h.ReadResponseAsync();
        Assert.Equal("keep-alive", r.Header("Connection"));
        Assert.Equal("GET /1 HTTP/1.0  []", r.Body);

        await h.SendAsync("GET /2 HTTP/1.0\r\n\r\n");
        r = await h.ReadResponseAsync();
        Assert.Equal("close", r.Header("Connection"));
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task ChunkedResponse_NoContentLength_BodyChunked()
    {
        await using var h = new Http1Harness(async e =>
        {
            await e.WriteAsync("a");
            await e.ResponseBody.FlushAsync();
            await e.WriteAsync("bc");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal("chunked", r.Header("Transfer-Encoding"));
        Assert.Null(r.Header("Content-Length"));
        Assert.Equal("abc", r.Body);
    }

    [Fact]
    public async Task Flush_BeforeCompletion_DeliversBytesAtOnce()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Type", "text/event-stream");
            await e.WriteAsync("data: 1\n\n");
            await e.ResponseBody.FlushAsync();
            await release.Task;
            await e.WriteAsync("data: 2\n\n");
        });
        await h.SendAsync("GET /events HTTP/1.1\r\nHost: h\r\n\r\n");

        // The head and the first event arrive while the handler is still blocked.
        var head = await ReadHeadOnlyAsync(h);
        Assert.Contains("Transfer-Encoding: chunked", head);
        Assert.Equal("data: 1\n\n", await h.ReadChunkAsync());
        Assert.False(release.Task.IsCompleted);

        release.SetResult();
        Assert.Equal("data: 2\n\n", await h.ReadChunkAsync());
    }

    private static async Task<string> ReadHeadOnlyAsync(Http1Harness h)
    {
        // Reads the status line + headers without touching the body.
        var sb = new StringBuilder();
        while (!sb.ToString().EndsWith("\r\n\r\n", StringComparison.Ordinal))
        {
            var result = await h.ToClient.Reader.ReadAsync().AsTask().WaitAsync(TimeSpan.FromSeconds(10));
            var text = Encoding.Latin1.GetString(result.Buffer.ToArray());
            var end = (sb + text).IndexOf("\r\n\r\n", StringComparison.Ordinal);
            if (end >= 0)
            {
                var take = end + 4 - sb.Length;
                sb.Append(text[..take]);
                h.ToClient.Reader.AdvanceTo(result.Buffer.GetPosition(take));
                break;
            }
            sb.Append(text);
            h.ToClient.Reader.AdvanceTo(result.Buffer.End);
        }
        return sb.ToString();
    }

    [Theory]
    [InlineData("GET / HTTP/1.1\r\n\r\n", 400)]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400)]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501)]
    [InlineData("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505)]
    [InlineData("GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", 400)]
    [InlineData("GET / HTTP/1.1\r\nHost: user@h\r\n\r\n", 400)]
    [InlineData("GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400)]
    [InlineData("GET http://target.example/ HTTP/1.1\r\nHost: other.example\r\n\r\n", 400)]
    public async Task BadRequest_ParserError_StatusAndClose(string request, int status)
    {
        var called = false;
        await using var h = new Http1Harness(_ => { called = true; return Task.CompletedTask; });
        await h.SendAsync(request);

        var r = await h.ReadResponseAsync();

        Assert.Equal(status, r.Status);
        Assert.Equal("close", r.Header("Connection"));
        Assert.False(string.IsNullOrEmpty(r.Body));
        Assert.Equal("", await h.ReadToEndAsync());
        Assert.False(called);
    }

    [Fact]
    public async Task Get_AbsoluteFormHostMismatch_400NamesTheReason()
    {
        var called = false;
        await using var h = new Http1Harness(_ => { called = true; return Task.CompletedTask; });
        await h.SendAsync("GET http://target.example/p HTTP/1.1\r\nHost: evil.example\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(400, r.Status);
        Assert.Contains("Host header does not match the request target", r.Body);
        Assert.False(called);
    }

    [Theory]
    [InlineData("INVALID CONNECTION PREFACE\r\n\r\n")]
    [InlineData("GET /\r\n\r\n")]
    public async Task FirstLine_WithoutHttpVersion_ClosesWithoutResponse(string request)
    {
        var called = false;
        await using var h = new Http1Harness(_ => { called = true; return Task.CompletedTask; });
        await h.SendAsync(request);

        Assert.Equal("", await h.ReadToEndAsync());
        Assert.False(called);
    }

    [Fact]
    public async Task LaterLine_WithoutHttpVersion_400AndClose()
    {
        await using var h = new Http1Harness(Echo);
        await h.SendAsync("GET /ok HTTP/1.1\r\nHost: h\r\n\r\nGARBAGE LINE\r\n\r\n");

        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        var second = await h.ReadResponseAsync();
        Assert.Equal(400, second.Status);
        Assert.Equal("close", second.Header("Connection"));
    }

    [Fact]
    public async Task Abort_AfterPartialChunkedBody_NoLastChunkAndClose()
    {
        await using var h = new Http1Harness(async e =>
        {
            await e.WriteAsync("partial");
            e.Abort(0);
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var all = await h.ReadToEndAsync();

        Assert.Contains("partial", all);
        Assert.DoesNotContain("\r\n0\r\n\r\n", all);
    }

    [Fact]
    public async Task BadRequest_HeadersTooLarge_431()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask, new Http1Options { MaxRequestHeadersTotalSize = 100 });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + new string('a', 200));

        Assert.Equal(431, (await h.ReadResponseAsync()).Status);
    }

    [Fact]
    public async Task BadChunkedBody_HandlerReading_400AndClose()
    {
        Exception? readError = null;
        await using var h = new Http1Harness(async e =>
        {
            try
            {
                await e.ReadBodyAsync();
            }
            catch (Exception ex)
            {
                readError = ex;
                throw;
            }
        });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX");

        var r = await h.ReadResponseAsync();

        Assert.Equal(400, r.Status);
        Assert.Equal("close", r.Header("Connection"));
        Assert.NotNull(readError);
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task HandlerThrows_BeforeResponse_500AndKeepAlive()
    {
        await using var h = new Http1Harness(e => e.RawTarget == "/boom" ? throw new InvalidOperationException("boom") : Echo(e));
        await h.SendAsync("GET /boom HTTP/1.1\r\nHost: h\r\n\r\nGET /ok HTTP/1.1\r\nHost: h\r\n\r\n");

        Assert.Equal(500, (await h.ReadResponseAsync()).Status);
        Assert.Equal("GET /ok HTTP/1.1 h []", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task Connect_Any_501AndClose()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask);
        await h.SendAsync("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");

        Assert.Equal(501, (await h.ReadResponseAsync()).Status);
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task KeepAlive_NextRequest_StartsFromAFreshExchange()
    {
        var seen = new List<string>();
        await using var h = new Http1Harness(async e =>
        {
            var headers = string.Join(",", e.RequestHeaders.Select(f => $"{f.Key}={f.Value}"));
            seen.Add($"{e.Method} {e.RawTarget} {e.Protocol} [{e.Authority}] {headers} | {e.StatusCode} {e.ReasonPhrase ?? "-"} {e.ResponseHeaders.Count} {e.RequestAborted.IsCancellationRequested} {e.HasResponseStarted}");
            if (e.RawTarget == "/1")
            {
                e.StatusCode = 201;
                e.ReasonPhrase = "Made";
                e.ResponseHeaders.Add("X-First", "1");
                e.ResponseHeaders.Add("Content-Length", "5");
                await e.WriteAsync("first");
            }
        });
        await h.SendAsync("POST /1 HTTP/1.1\r\nHost: a\r\nUser-Agent: one\r\nContent-Length: 2\r\n\r\nxy");
        var first = await h.ReadResponseAsync();
        // Same field names in the same order, another value; then HTTP/1.0 without Host (no authority).
        await h.SendAsync("GET /2 HTTP/1.1\r\nHost: a\r\nUser-Agent: two\r\n\r\n");
        var second = await h.ReadResponseAsync();
        await h.SendAsync("GET /2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        var third = await h.ReadResponseAsync();

        Assert.Equal((201, "Made", "1", "first"), (first.Status, first.Reason, first.Header("X-First"), first.Body));
        Assert.Equal((200, "OK", null, "0"), (second.Status, second.Reason, second.Header("X-First"), second.Header("Content-Length")));
        Assert.Equal(200, third.Status);
        Assert.Equal(
        [
            "POST /1 HTTP/1.1 [a] Host=a,User-Agent=one,Content-Length=2 | 200 - 0 False False",
            "GET /2 HTTP/1.1 [a] Host=a,User-Agent=two | 200 - 0 False False",
            "GET /2 HTTP/1.0 [] Connection=keep-alive | 200 - 0 False False",
        ], seen);
    }

    [Fact]
    public async Task KeepAlive_AbortOnLaterRequest_EarlierRequestsRegistrationsDoNotFire()
    {
        var firstCallbackFired = false;
        var secondAborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(e =>
        {
            if (e.RawTarget == "/1")
            {
                // Left registered when the handler returns, as a careless app would.
                e.RequestAborted.Register(() => firstCallbackFired = true);
                return Task.CompletedTask;
            }
            e.RequestAborted.Register(() => secondAborted.TrySetResult());
            e.Abort(0);
            return Task.CompletedTask;
        });
        await h.SendAsync("GET /1 HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await h.SendAsync("GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");

        await secondAborted.Task.WaitAsync(TimeSpan.FromSeconds(10));
        await h.Processing.WaitAsync(TimeSpan.FromSeconds(10));
        Assert.False(firstCallbackFired);
    }
}
