using System.Buffers;
using System.IO.Pipelines;
using System.Text;
using Proxy.Protocols.Http1;

namespace Proxy.Protocols.Tests.Http1;

public class Http1ConnectionLifecycleTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(10);

    [Fact]
    public async Task LargeBody_SlowReader_ClientIsBackpressured()
    {
        const int size = 1024 * 1024;
        var handlerStarted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var startReading = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        long received = 0;
        var transport = new PipeOptions(pauseWriterThreshold: 64 * 1024, resumeWriterThreshold: 32 * 1024);
        await using var h = new Http1Harness(async e =>
        {
            handlerStarted.SetResult();
            await startReading.Task;
            while (true)
            {
                var result = await e.RequestBody.ReadAsync();
                received += result.Buffer.Length;
                e.RequestBody.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
        }, toServerOptions: transport);

        await h.SendAsync($"POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: {size}\r\n\r\n");
        await handlerStarted.Task.WaitAsync(Guard);
        var bodyWrite = h.ToServer.Writer.WriteAsync(new byte[size]).AsTask();

        // Nobody reads the body yet, so the transport pipe fills and the client's write waits.
        Assert.False(bodyWrite.IsCompleted);

        startReading.SetResult();
        await bodyWrite.WaitAsync(Guard);
        var r = await h.ReadResponseAsync();
        Assert.Equal(200, r.Status);
        Assert.Equal(size, received);
    }

    [Fact]
    public async Task LargeChunkedResponse_StreamedThroughTransport()
    {
        const int chunks = 200;
        var payload = new string('x', 4000);
        await using var h = new Http1Harness(async e =>
        {
            for (var i = 0; i < chunks; i++)
            {
                await e.WriteAsync(payload);
                await e.ResponseBody.FlushAsync();
            }
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(chunks * payload.Length, r.Body.Length);
    }

    [Fact]
    public async Task HeadersTimeout_PartialHead_408AndClose()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask, new Http1Options { RequestHeadersTimeout = TimeSpan.FromSeconds(5) });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n");

        h.Time.Advance(TimeSpan.FromSeconds(5));

        var r = await h.ReadResponseAsync();
        Assert.Equal(408, r.Status);
        Assert.Equal("", await h.ReadToEndAsync());
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task HeadersTimeout_NotYetDue_ConnectionStillServes()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask, new Http1Options { RequestHeadersTimeout = TimeSpan.FromSeconds(5) });
        await h.SendAsync("GET / HTTP/1.1\r\n");
        h.Time.Advance(TimeSpan.FromSeconds(4));
        await h.SendAsync("Host: h\r\n\r\n");

        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
    }

    [Fact]
    public async Task KeepAliveTimeout_IdleAfterResponse_ClosesSilently()
    {
        var options = new Http1Options { RequestHeadersTimeout = TimeSpan.FromSeconds(5), KeepAliveTimeout = TimeSpan.FromSeconds(60) };
        await using var h = new Http1Harness(_ => Task.CompletedTask, options);
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await WaitUntilIdleAsync(h);

        // Idle longer than the headers timeout but within keep-alive: still open.
        h.Time.Advance(TimeSpan.FromSeconds(30));
        await h.SendAsync("GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await WaitUntilIdleAsync(h);

        h.Time.Advance(TimeSpan.FromSeconds(60));

        Assert.Equal("", await h.ReadToEndAsync());
        await h.Processing.WaitAsync(Guard);
    }

    /// <summary>
    /// The timeouts move a deadline and the timer catches up with it: a head that starts late in the keep-alive idle time
    /// gets the whole headers timeout from its first byte, past the moment the timer was first due, and no more.
    /// </summary>
    [Fact]
    public async Task HeadersTimeout_HeadStartsWhileKeepAliveIdles_FullTimeFromItsFirstByte()
    {
        var options = new Http1Options { RequestHeadersTimeout = TimeSpan.FromSeconds(5), KeepAliveTimeout = TimeSpan.FromSeconds(60) };
        await using var h = new Http1Harness(_ => Task.CompletedTask, options);
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await WaitUntilIdleAsync(h);

        h.Time.Advance(TimeSpan.FromSeconds(4));
        await h.SendAsync("GET /2 HTTP/1.1\r\n");
        await WaitUntilReadingHeadAsync(h);
        h.Time.Advance(TimeSpan.FromSeconds(4)); // 8 s after the response, 4 s into the head: within its 5 s
        await h.SendAsync("Host: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await WaitUntilIdleAsync(h);

        await h.SendAsync("GET /3 HTTP/1.1\r\n");
        await WaitUntilReadingHeadAsync(h);
        h.Time.Advance(TimeSpan.FromSeconds(5));

        Assert.Equal(408, (await h.ReadResponseAsync()).Status);
        await h.Processing.WaitAsync(Guard);
    }

    // Synchronisation, not timing: wait until the loop has armed the keep-alive timer (idle), or has taken the next head's
    // first bytes and runs the headers timeout (idle: false).
    private static Task WaitUntilIdleAsync(Http1Harness h) => WaitUntilAsync(h, idle: true);

    private static Task WaitUntilReadingHeadAsync(Http1Harness h) => WaitUntilAsync(h, idle: false);

    private static async Task WaitUntilAsync(Http1Harness h, bool idle)
    {
        var deadline = DateTime.UtcNow + Guard;
        while (h.Connection.IsWaitingForNextRequest != idle)
        {
            Assert.True(DateTime.UtcNow < deadline, idle ? "connection never went idle" : "the head's first bytes were never read");
            await Task.Yield();
        }
    }

    [Fact]
    public async Task RequestAborted_ClientDisconnects_Fires()
    {
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var started = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            e.RequestAborted.Register(() => aborted.TrySetResult());
            await e.WriteAsync("data: hello\n\n");
            await e.ResponseBody.FlushAsync();
            started.SetResult();
            await aborted.Task;
        });
        await h.SendAsync("GET /sse HTTP/1.1\r\nHost: h\r\n\r\n");
        await started.Task.WaitAsync(Guard);
        Assert.False(aborted.Task.IsCompleted);

        h.CloseClient();

        await aborted.Task.WaitAsync(Guard);
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task Abort_DuringHandler_RequestAbortedFiresAndProcessingEnds()
    {
        var started = new TaskCompletionSource<HttpExchange>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            started.SetResult(e);
            await Task.Delay(Timeout.Infinite, e.RequestAborted).ContinueWith(_ => { });
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        var exchange = await started.Task.WaitAsync(Guard);

        exchange.Abort(0);

        await h.Processing.WaitAsync(Guard);
        Assert.True(exchange.RequestAborted.IsCancellationRequested);
    }

    [Fact]
    public async Task Head_ContentLengthSetAndBodyWritten_NoBodySent()
    {
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Length", "5");
            await e.WriteAsync("hello");
        });
        await h.SendAsync("HEAD / HTTP/1.1\r\nHost: h\r\n\r\nGET /next HTTP/1.1\r\nHost: h\r\n\r\n");

        var head = await h.ReadResponseAsync(noBody: true);
        Assert.Equal("5", head.Header("Content-Length"));
        var next = await h.ReadResponseAsync();
        Assert.Equal("hello", next.Body);
    }

    [Fact]
    public async Task Status204_BodyWrites_NoBodyNoContentLength()
    {
        await using var h = new Http1Harness(async e =>
        {
            e.StatusCode = 204;
            await e.WriteAsync("ignored");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();
        Assert.Equal(204, r.Status);
        Assert.Null(r.Header("Content-Length"));
        Assert.Null(r.Header("Transfer-Encoding"));
        Assert.Equal(204, (await h.ReadResponseAsync()).Status);
    }

    [Fact]
    public async Task ExpectContinue_AppReadsBody_100ThenFinalResponse()
    {
        await using var h = new Http1Harness(async e =>
        {
            var body = await e.ReadBodyAsync();
            await e.WriteAsync(body.ToUpperInvariant());
        });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");

        var interim = await h.ReadResponseAsync();
        Assert.Equal(100, interim.Status);
        await h.SendAsync("hello");

        Assert.Equal("HELLO", (await h.ReadResponseAsync()).Body);
    }

    /// <summary>
    /// A proxy reads the request body and writes the response in two flows: here the body read sends 100 Continue, whose
    /// flush waits for the client to read, while the response is written and flushed. The response's flush waits for the
    /// 100's (a transport's writer takes one flush at a time), and the client gets the 100, then the response, whole.
    /// </summary>
    [Fact]
    public async Task ExpectContinue_ResponseWrittenWhileTheContinueFlushWaits_100ThenFinalResponse()
    {
        var continueFlushPending = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var body = e.ReadBodyAsync(); // writes the 100 and flushes; the flush waits (the client reads nothing yet)
            continueFlushPending.TrySetResult();
            e.StatusCode = 200;
            await e.WriteAsync("early ");
            await e.WriteAsync(await body);
        }, toClientOptions: new PipeOptions(pauseWriterThreshold: 1, resumeWriterThreshold: 1, useSynchronizationContext: false));
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
        await continueFlushPending.Task.WaitAsync(Guard);

        Assert.Equal(100, (await h.ReadResponseAsync()).Status);
        await h.SendAsync("hello");

        Assert.Equal("early hello", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task TryRead_BodyCameWithItsHead_TakenWithoutAnAwait()
    {
        await using var h = new Http1Harness(async e =>
        {
            var took = e.RequestBody.TryRead(out var read);
            var text = took ? Encoding.ASCII.GetString(read.Buffer) : "";
            if (took)
            {
                e.RequestBody.AdvanceTo(read.Buffer.End);
            }
            await e.WriteAsync($"{took}:{text}");
        });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");

        Assert.Equal("True:hello", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task ExpectContinue_TryRead_TakesNothingAndSendsNoContinue_TheReadThenDoes()
    {
        var tried = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            tried.SetResult(e.RequestBody.TryRead(out _));
            var body = await e.ReadBodyAsync();
            await e.WriteAsync(body.ToUpperInvariant());
        });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");

        Assert.False(await tried.Task.WaitAsync(Guard)); // starting this body owes the client a 100: only a read does that
        Assert.Equal(100, (await h.ReadResponseAsync()).Status);
        await h.SendAsync("hello");
        Assert.Equal("HELLO", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task ExpectContinue_AppRespondsWithoutReading_NoContinueAndClose()
    {
        await using var h = new Http1Harness(e => { e.StatusCode = 401; return Task.CompletedTask; });
        await h.SendAsync("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(401, r.Status);
        Assert.Equal("close", r.Header("Connection"));
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task UnreadBody_SmallRemainder_DrainedAndNextRequestServed()
    {
        await using var h = new Http1Harness(async e => await e.WriteAsync(e.RawTarget));
        await h.SendAsync("POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");

        Assert.Equal("/1", (await h.ReadResponseAsync()).Body);
        Assert.Equal("/2", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task ContentLengthBody_ExaminedWholeWithoutConsuming_ReadAgainAtOnce_PipelinedNextServed()
    {
        // As the relay's prebuffer does: look at the whole body without consuming it, then read it for real. The body's
        // end is known, so the second read must not wait for bytes (those would be the next request's).
        await using var h = new Http1Harness(async e =>
        {
            var peek = await e.RequestBody.ReadAsync();
            Assert.True(peek.IsCompleted);
            e.RequestBody.AdvanceTo(peek.Buffer.Start, peek.Buffer.End);
            var read = await e.RequestBody.ReadAsync().AsTask().WaitAsync(Guard);
            Assert.True(read.IsCompleted);
            var body = Encoding.ASCII.GetString(read.Buffer.ToArray());
            e.RequestBody.AdvanceTo(read.Buffer.End);
            var end = await e.RequestBody.ReadAsync(); // past the end: completed, nothing of the next request
            Assert.True(end.IsCompleted);
            Assert.True(end.Buffer.IsEmpty);
            e.RequestBody.AdvanceTo(end.Buffer.End);
            Assert.False(((Http1RequestBody)e.RequestBody).UsedInnerPipe); // slices of the transport's input, no copy
            await e.WriteAsync(e.RawTarget + ":" + body);
        });
        await h.SendAsync("POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789GET /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc");

        Assert.Equal("/1:0123456789", (await h.ReadResponseAsync()).Body);
        Assert.Equal("/2:abc", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task ContentLengthBody_ArrivingInPieces_ReadWhole()
    {
        var bodyRead = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var text = new StringBuilder();
            while (true)
            {
                var result = await e.RequestBody.ReadAsync();
                text.Append(Encoding.ASCII.GetString(result.Buffer.ToArray()));
                e.RequestBody.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
            bodyRead.SetResult(text.ToString());
            await e.WriteAsync("ok");
        });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\nhello ");
        Assert.False(bodyRead.Task.IsCompleted);
        await h.SendAsync("world!");

        Assert.Equal("hello world!", await bodyRead.Task.WaitAsync(Guard));
        Assert.Equal("ok", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task ContentLengthBody_ClientClosesMidBody_ReadFailsAndRequestAborted()
    {
        var failure = new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);
        var firstRead = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        HttpExchange? exchange = null;
        await using var h = new Http1Harness(async e =>
        {
            exchange = e;
            try
            {
                while (true)
                {
                    var result = await e.RequestBody.ReadAsync();
                    e.RequestBody.AdvanceTo(result.Buffer.End);
                    firstRead.TrySetResult();
                    if (result.IsCompleted)
                    {
                        break;
                    }
                }
            }
            catch (Exception ex)
            {
                failure.SetResult(ex);
            }
        });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\npart");
        await firstRead.Task.WaitAsync(Guard);

        h.CloseClient();

        Assert.IsType<IOException>(await failure.Task.WaitAsync(Guard));
        Assert.True(exchange!.RequestAborted.IsCancellationRequested);
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task ContentLengthBody_ReadWhole_ThenClientCloses_RequestAbortedFires()
    {
        // After the body the connection watches for the client leaving while the app still responds (SSE after a POST).
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var bodyDone = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            e.RequestAborted.Register(() => aborted.TrySetResult());
            var result = await e.RequestBody.ReadAsync();
            Assert.True(result.IsCompleted);
            e.RequestBody.AdvanceTo(result.Buffer.End);
            await e.WriteAsync("data: hello\n\n");
            await e.ResponseBody.FlushAsync();
            bodyDone.SetResult();
            await aborted.Task;
        });
        await h.SendAsync("POST /sse HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
        await bodyDone.Task.WaitAsync(Guard);
        Assert.False(aborted.Task.IsCompleted);

        h.CloseClient();

        await aborted.Task.WaitAsync(Guard);
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task ContentLengthBody_ReadWhole_ConnectionCloses_DisconnectWatchEndsBeforeTheInputIsCompleted()
    {
        // The body was read, so the connection watches the input for the client leaving; the request asked for the
        // connection to close, so there is no drain to take the input back. The watch's read must end before the input is
        // completed (its blocks go back to the pool then), not linger on a completed reader.
        var watching = new TaskCompletionSource<(bool Watch, bool Pump)>(TaskCreationOptions.RunContinuationsAsynchronously);
        Http1Harness? harness = null;
        await using var h = harness = new Http1Harness(async e =>
        {
            var result = await e.RequestBody.ReadAsync();
            Assert.True(result.IsCompleted);
            e.RequestBody.AdvanceTo(result.Buffer.End);
            // The direct body hands the watch to the connection's own (one pending read, no task of the body's).
            watching.SetResult((harness!.Connection.IsWatchOutstanding, ((Http1Exchange)e).Body!.Pump is not null));
            await e.WriteAsync("done");
        });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello");

        Assert.Equal("done", (await h.ReadResponseAsync()).Body);
        Assert.Equal((true, false), await watching.Task.WaitAsync(Guard));
        await h.Processing.WaitAsync(Guard);
        Assert.False(h.Connection.IsWatchOutstanding, "the disconnect watch still reads the input the connection completed");
    }

    [Fact]
    public async Task ContentLengthBody_ReadWhole_NextRequestOnTheConnection_IsServedFromTheWatchRead()
    {
        // The watch's read after a Content-Length body becomes the next head's first read: a second POST and a GET on the
        // same connection are both served, in order, and each body arrives whole.
        var bodies = new List<string>();
        await using var h = new Http1Harness(async e =>
        {
            var body = await e.ReadBodyAsync();
            lock (bodies)
            {
                bodies.Add(body);
            }
            await e.WriteAsync("got:" + body);
        });
        await h.SendAsync("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
        Assert.Equal("got:hello", (await h.ReadResponseAsync()).Body);

        await h.SendAsync("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nworld!");
        Assert.Equal("got:world!", (await h.ReadResponseAsync()).Body);
        await h.SendAsync("GET /c HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal("got:", (await h.ReadResponseAsync()).Body);
        Assert.Equal(["hello", "world!", ""], bodies);
    }

    [Fact]
    public async Task ChunkedBody_AppFailsAfterRespondingWithoutReadingOn_PumpEndsBeforeTheInputIsCompleted()
    {
        // A chunked body goes through the pump into the app's pipe. The app reads a little, starts its response and fails:
        // the connection closes without draining, while the pump waits for the app to read what it wrote (the pipe is
        // full) or reads more of the body. It must stop before the input is completed, not hold the input (or wait forever).
        var body = new TaskCompletionSource<Http1RequestBody>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var result = await e.RequestBody.ReadAsync();
            e.RequestBody.AdvanceTo(result.Buffer.Start); // keeps it all: the pump fills the pipe and waits
            body.SetResult(((Http1Exchange)e).Body!);
            await e.WriteAsync("partial");
            await e.ResponseBody.FlushAsync();
            throw new InvalidOperationException("the app failed mid-response");
        });
        var chunk = new string('x', 16 * 1024);
        var request = new StringBuilder("POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (var i = 0; i < 8; i++)
        {
            request.Append($"{chunk.Length:x}\r\n{chunk}\r\n"); // 128 KB, past the app pipe's 64 KB pause threshold
        }
        await h.SendAsync(request.ToString()); // the body's end is never sent

        await AssertPumpEndedWithTheConnectionAsync(h, body.Task, "the body pump still runs on the input the connection completed");
    }

    /// <summary>The connection ended, and by then the body's pump (or disconnect watch) had ended too.</summary>
    private static async Task AssertPumpEndedWithTheConnectionAsync(Http1Harness h, Task<Http1RequestBody> body, string failure)
    {
        await h.Processing.WaitAsync(Guard);
        var pump = (await body.WaitAsync(Guard)).Pump;
        Assert.NotNull(pump);
        Assert.True(pump.IsCompleted, failure);
    }

    [Fact]
    public async Task ContentLengthBody_AbortWhileReadWaits_ReadThrows()
    {
        var waiting = new TaskCompletionSource<HttpExchange>(TaskCreationOptions.RunContinuationsAsynchronously);
        var failure = new TaskCompletionSource<Exception?>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var first = await e.RequestBody.ReadAsync();
            e.RequestBody.AdvanceTo(first.Buffer.End);
            var pending = e.RequestBody.ReadAsync(); // the rest is not sent
            waiting.SetResult(e);
            try
            {
                await pending;
                failure.SetResult(null);
            }
            catch (Exception ex)
            {
                failure.SetResult(ex);
            }
        });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\npart");
        var exchange = await waiting.Task.WaitAsync(Guard);

        exchange.Abort(0);

        Assert.IsType<IOException>(await failure.Task.WaitAsync(Guard));
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task ContentLengthBody_AppCancelsItsPendingRead_GetsACanceledResult()
    {
        var waiting = new TaskCompletionSource<HttpExchange>(TaskCreationOptions.RunContinuationsAsynchronously);
        var canceled = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var first = await e.RequestBody.ReadAsync();
            e.RequestBody.AdvanceTo(first.Buffer.End);
            var pending = e.RequestBody.ReadAsync();
            waiting.SetResult(e);
            var result = await pending;
            canceled.SetResult(result.IsCanceled);
            e.RequestBody.AdvanceTo(result.Buffer.End);
            await e.WriteAsync("stopped");
        });
        await h.SendAsync("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\npart");
        var exchange = await waiting.Task.WaitAsync(Guard);

        exchange.RequestBody.CancelPendingRead();

        Assert.True(await canceled.Task.WaitAsync(Guard));
        Assert.Equal("stopped", (await h.ReadResponseAsync()).Body);
    }

    [Fact]
    public async Task UnreadBody_LargerThanDrainLimit_ConnectionClosed()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask, new Http1Options { MaxRequestBodyDrainSize = 4 });
        await h.SendAsync("POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");

        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task Trailers_ClientSentTeTrailers_SentInLastChunk()
    {
        bool? supported = null;
        await using var h = new Http1Harness(async e =>
        {
            supported = e.SupportsTrailers;
            await e.WriteAsync("body");
            e.ResponseTrailers.Add("grpc-status", "0");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.True(supported);
        Assert.Equal("body", r.Body);
        Assert.Equal(new[] { ("grpc-status", "0") }, r.Trailers);
    }

    [Fact]
    public async Task Trailers_ClientDidNotAsk_Dropped()
    {
        bool? supported = null;
        await using var h = new Http1Harness(async e =>
        {
            supported = e.SupportsTrailers;
            await e.WriteAsync("body");
            e.ResponseTrailers.Add("grpc-status", "0");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.False(supported);
        Assert.Equal("body", r.Body);
        Assert.Empty(r.Trailers);
    }

    [Fact]
    public async Task ContentLength_AppWritesTooMuch_WriteThrows()
    {
        Exception? error = null;
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Length", "3");
            try
            {
                await e.WriteAsync("toolong");
            }
            catch (InvalidOperationException ex)
            {
                error = ex;
                throw;
            }
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        // The head went out before the failing write, so the connection is closed rather than answered with 500.
        var all = await h.ReadToEndAsync();
        Assert.StartsWith("HTTP/1.1 200 OK", all);
        Assert.NotNull(error);
    }

    [Fact]
    public async Task ContentLength_AppWritesTooLittle_ConnectionClosed()
    {
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Length", "10");
            await e.WriteAsync("short");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var all = await h.ReadToEndAsync();
        Assert.EndsWith("\r\n\r\nshort", all);
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task ResponseHeader_WithNewline_Rejected500()
    {
        await using var h = new Http1Harness(e => { e.ResponseHeaders.Add("X-Bad", "a\r\nInjected: yes"); return Task.CompletedTask; });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(500, r.Status);
        Assert.Null(r.Header("Injected"));
    }

    [Fact]
    public async Task ResponseHead_ExactBytes_StatusLineFieldsInOrderFramingOurs()
    {
        await using var h = new Http1Harness(async e =>
        {
            e.ResponseHeaders.Add("Content-Type", "text/plain");
            e.ResponseHeaders.Add("X-Two", "a");
            e.ResponseHeaders.Add("X-Two", "b");
            // Framing and persistence fields are the engine's: the app's are not copied.
            e.ResponseHeaders.Add("Transfer-Encoding", "gzip");
            e.ResponseHeaders.Add("Keep-Alive", "timeout=5");
            e.ResponseHeaders.Add("Content-Length", "2");
            await e.WriteAsync("hi");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        var rest = await h.ReadToEndAsync();

        Assert.Equal("hi", r.Body);
        Assert.Equal([("Content-Type", "text/plain"), ("X-Two", "a"), ("X-Two", "b"), ("Content-Length", "2")], r.Headers);
        Assert.Equal("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Two: a\r\nX-Two: b\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", rest);
    }

    [Fact]
    public async Task ResponseHead_CustomReasonAndLatin1Value_SentAsLatin1()
    {
        await using var h = new Http1Harness(e =>
        {
            e.StatusCode = 299;
            e.ReasonPhrase = "Très Bien";
            e.ResponseHeaders.Add("X-Name", "café\tnoir");
            return Task.CompletedTask;
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");

        var all = await h.ReadToEndAsync();

        // The harness decodes Latin-1, so one octet per character is what went over the wire.
        Assert.Equal("HTTP/1.1 299 Très Bien\r\nX-Name: café\tnoir\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", all);
    }

    [Theory]
    [InlineData("X Bad", "v", null)]
    [InlineData("", "v", null)]
    [InlineData("X-Ok", "del\u007f", null)]
    [InlineData("X-Ok", "wide\u0100", null)]
    [InlineData("X-Ok", "nul\0", null)]
    [InlineData("X-Ok", "v", "Bad\r\nInjected: yes")]
    public async Task ResponseHead_InvalidNameValueOrReason_Rejected500(string name, string value, string? reason)
    {
        await using var h = new Http1Harness(e =>
        {
            e.ResponseHeaders.Add(name, value);
            e.ReasonPhrase = reason;
            return Task.CompletedTask;
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal(500, r.Status);
        Assert.Equal("Internal Server Error", r.Reason);
        Assert.Null(r.Header("Injected"));
        Assert.Null(r.Header("X-Ok"));
    }

    [Fact]
    public async Task Trailers_FramingFieldsDropped_OthersInOrder()
    {
        await using var h = new Http1Harness(async e =>
        {
            await e.WriteAsync("x");
            await e.ResponseBody.FlushAsync();
            e.ResponseTrailers.Add("X-A", "1");
            e.ResponseTrailers.Add("Connection", "close");
            e.ResponseTrailers.Add("X-B", "2");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n");

        var r = await h.ReadResponseAsync();

        Assert.Equal("x", r.Body);
        Assert.Equal([("X-A", "1"), ("X-B", "2")], r.Trailers);
    }

    [Fact]
    public async Task NextRequestArrivesWhileHandlerRuns_NotAbortedAndServedInOrder()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var firstStarted = new TaskCompletionSource<HttpExchange>(TaskCreationOptions.RunContinuationsAsynchronously);
        var abortedDuringFirst = true;
        await using var h = new Http1Harness(async e =>
        {
            if (e.RawTarget == "/1")
            {
                firstStarted.SetResult(e);
                await release.Task;
                abortedDuringFirst = e.RequestAborted.IsCancellationRequested;
            }
            e.ResponseHeaders.Add("Content-Length", "2");
            await e.WriteAsync(e.RawTarget);
        });
        await h.SendAsync("GET /1 HTTP/1.1\r\nHost: h\r\n\r\n");
        await firstStarted.Task.WaitAsync(Guard);

        // The second request lands on the disconnect watch's pending read while /1 is still running.
        await h.SendAsync("GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");
        await Task.Delay(50);
        release.SetResult();

        Assert.Equal("/1", (await h.ReadResponseAsync()).Body);
        Assert.Equal("/2", (await h.ReadResponseAsync()).Body);
        Assert.False(abortedDuringFirst);
        Assert.False(h.Processing.IsCompleted);
    }

    [Fact]
    public async Task ClientClosesAfterRequest_HandlerRunning_AbortedAndResponseStillWritten()
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var aborted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            e.RequestAborted.Register(() => aborted.TrySetResult());
            await release.Task;
            e.ResponseHeaders.Add("Content-Length", "2");
            await e.WriteAsync("ok");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        h.CloseClient(); // a half-close: the request is complete, then end of input

        await aborted.Task.WaitAsync(Guard);
        release.SetResult();

        // The output is still open, so the response goes out; then the connection ends.
        var all = await h.ReadToEndAsync();
        Assert.StartsWith("HTTP/1.1 200 OK\r\n", all);
        Assert.EndsWith("\r\n\r\nok", all);
        await h.Processing.WaitAsync(Guard);
    }

    [Fact]
    public async Task Abort_WhileIdleBetweenRequests_ProcessingEnds()
    {
        await using var h = new Http1Harness(_ => Task.CompletedTask);
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        await WaitUntilIdleAsync(h);

        h.Connection.Abort();

        await h.Processing.WaitAsync(Guard);
        Assert.Equal("", await h.ReadToEndAsync());
    }

    [Fact]
    public async Task NoBody_RequestBody_BehavesLikeACompletedPipe()
    {
        var checks = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var h = new Http1Harness(async e =>
        {
            var body = e.RequestBody;
            var first = await body.ReadAsync();
            body.AdvanceTo(first.Buffer.End);
            body.CancelPendingRead();
            var cancelled = await body.ReadAsync();
            body.AdvanceTo(cancelled.Buffer.End);
            var after = await body.ReadAsync();
            body.AdvanceTo(after.Buffer.End);
            await body.CompleteAsync();
            var threw = false;
            try
            {
                await body.ReadAsync();
            }
            catch (InvalidOperationException)
            {
                threw = true;
            }
            checks.SetResult($"{first.IsCompleted} {first.Buffer.Length} {first.IsCanceled}|{cancelled.IsCanceled} {cancelled.IsCompleted}|{after.IsCanceled}|{threw}");
        });
        await h.SendAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n");

        Assert.Equal(200, (await h.ReadResponseAsync()).Status);
        Assert.Equal("True 0 False|True True|False|True", await checks.Task.WaitAsync(Guard));
    }
}
