using System.Collections.Concurrent;
using System.Text;
using Proxy.Protocols.Http2;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// A handler that takes some streams on the connection's event loop (IEventLoopRequestHandler, the proxy's direct path):
/// the engine offers it each new stream there, and the app gets the ones it declines on the thread pool, never on the
/// loop. A producer's output wakes the writer loop through the connection's scheduler.
/// </summary>
public class Http2EventLoopTests
{
    private sealed class SplitHandler(TestEventLoop loop) : IEventLoopRequestHandler
    {
        public ConcurrentQueue<string> Calls { get; } = new();

        public Task? TryHandleOnEventLoop(HttpExchange exchange)
        {
            Calls.Enqueue($"offer {exchange.RawTarget} loop={loop.IsCurrentThread}");
            if (exchange.RawTarget != "/loop")
            {
                return null;
            }
            exchange.ResponseHeaders.Add("x-ran", "loop");
            return exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("from the loop")).AsTask();
        }

        public IHttpRequestHandler Declined => new DelegateRequestHandler(async exchange =>
        {
            Calls.Enqueue($"declined {exchange.RawTarget} loop={loop.IsCurrentThread} pool={Thread.CurrentThread.IsThreadPoolThread}");
            exchange.ResponseHeaders.Add("x-ran", "app");
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("from the app"));
        });

        // The engine never calls this when it can offer the stream on the loop.
        public Task HandleAsync(HttpExchange exchange)
        {
            Calls.Enqueue($"handle {exchange.RawTarget}");
            return Task.CompletedTask;
        }
    }

    [Fact]
    public async Task NewStreams_OfferedOnTheLoop_TakenOnesRunThere_DeclinedOnesRunOnThePool()
    {
        using var loop = new TestEventLoop();
        var handler = new SplitHandler(loop);
        await using var peer = await Http2TestPeer.StartOnLoopAsync(handler, loop);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "GET", "/loop");
        var taken = await peer.ReadResponseAsync(1);
        await peer.SendRequestHeadersAsync(3, "GET", "/app");
        var declined = await peer.ReadResponseAsync(3);

        Assert.Equal("loop", taken.Headers["x-ran"]);
        Assert.Equal("from the loop", Encoding.ASCII.GetString(taken.Body));
        Assert.Equal("app", declined.Headers["x-ran"]);
        Assert.Equal("from the app", Encoding.ASCII.GetString(declined.Body));
        Assert.Equal(["offer /loop loop=True", "offer /app loop=True", "declined /app loop=False pool=True"], handler.Calls.ToArray());
        // The writer loop was woken through the scheduler (the responses above went out through it).
        Assert.Contains("WriterWake", loop.RanStates);
    }

    private sealed class BodyReadingHandler(TestEventLoop loop) : IEventLoopRequestHandler
    {
        public ConcurrentQueue<string> Reads { get; } = new();

        /// <summary>Set when a body read found nothing yet and waits (replaced by the test per request).</summary>
        public TaskCompletionSource Waiting { get; set; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public Task? TryHandleOnEventLoop(HttpExchange exchange) => exchange.RawTarget == "/loop" ? EchoAsync(exchange, "loop") : null;

        public IHttpRequestHandler Declined => new DelegateRequestHandler(exchange => EchoAsync(exchange, "app"));

        public Task HandleAsync(HttpExchange exchange) => Task.CompletedTask;

        private async Task EchoAsync(HttpExchange exchange, string who)
        {
            var body = new MemoryStream();
            while (true)
            {
                var pending = exchange.RequestBody.ReadAsync();
                if (!pending.IsCompleted)
                {
                    Waiting.TrySetResult();
                }
                // NOTE: ConfigureAwait(false): a read that waited resumes where the pipe's scheduler puts it.
                var read = await pending.ConfigureAwait(false);
                Reads.Enqueue($"{who} loop={loop.IsCurrentThread}");
                foreach (var segment in read.Buffer)
                {
                    body.Write(segment.Span);
                }
                exchange.RequestBody.AdvanceTo(read.Buffer.End);
                if (read.IsCompleted)
                {
                    break;
                }
            }
            await exchange.ResponseBody.WriteAsync(body.ToArray()).ConfigureAwait(false);
        }
    }

    [Fact]
    public async Task RequestBody_OfAStreamTakenOnTheLoop_IsReadThere_ADeclinedOnesOnThePool()
    {
        using var loop = new TestEventLoop();
        var handler = new BodyReadingHandler(loop);
        await using var peer = await Http2TestPeer.StartOnLoopAsync(handler, loop);
        await peer.HandshakeAsync();

        foreach (var (id, path) in new[] { (1, "/loop"), (3, "/app") })
        {
            handler.Waiting = new(TaskCreationOptions.RunContinuationsAsynchronously);
            await peer.SendRequestHeadersAsync(id, "POST", path, endStream: false);
            // Only the headers so far: the handler's first read waits, and resumes when the DATA comes.
            await handler.Waiting.Task.WaitAsync(TimeSpan.FromSeconds(20));
            await peer.SendDataAsync(id, Encoding.ASCII.GetBytes("payload " + id), endStream: true);
            var response = await peer.ReadResponseAsync(id);
            Assert.Equal("payload " + id, Encoding.ASCII.GetString(response.Body));
            var reads = handler.Reads.ToArray();
            handler.Reads.Clear();
            Assert.All(reads, r => Assert.Equal(path == "/loop" ? "loop loop=True" : "app loop=False", r));
        }
    }

    [Fact]
    public async Task PlainHandler_OnAnEventLoopConnection_RunsOnThePool()
    {
        using var loop = new TestEventLoop();
        var onLoop = new ConcurrentQueue<bool>();
        await using var peer = await Http2TestPeer.StartOnLoopAsync(new DelegateRequestHandler(async exchange =>
        {
            onLoop.Enqueue(loop.IsCurrentThread);
            await exchange.ResponseBody.WriteAsync("ok"u8.ToArray());
        }), loop);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "GET", "/");
        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Headers[":status"]);
        Assert.Equal([false], onLoop.ToArray());
    }

    /// <summary>Where each writer flush ran, and how many bytes it carried (the writer's batch metric).</summary>
    private sealed class FlushRecorder(TestEventLoop loop) : IProtocolMetrics
    {
        public ConcurrentQueue<(bool OnLoop, long Bytes)> Flushes { get; } = new();
        public bool StreamStarted() => false;
        public void StreamEnded() { }
        public void StreamReset(bool sent, Proxy.Codecs.Http2.Http2ErrorCode code) { }
        public void StreamRefused() { }
        public void GoAway(bool sent, Proxy.Codecs.Http2.Http2ErrorCode code) { }
        public bool FlowControlStallEnabled => false;
        public void FlowControlStalled(TimeSpan duration) { }
        public bool WriterBatchEnabled => true;
        public void WriterBatch(int frames, long bytes) => Flushes.Enqueue((loop.IsCurrentThread, bytes));
    }

    private sealed class FileHandler(string path) : IEventLoopRequestHandler
    {
        public Task? TryHandleOnEventLoop(HttpExchange exchange) => SendAsync(exchange);

        private async Task SendAsync(HttpExchange exchange)
        {
            using var file = File.OpenHandle(path);
            await exchange.SendFileAsync(file, 0, new FileInfo(path).Length);
        }

        public IHttpRequestHandler Declined { get; } = new DelegateRequestHandler(_ => Task.CompletedTask);

        public Task HandleAsync(HttpExchange exchange) => Task.CompletedTask;
    }

    [Fact]
    public async Task FileOutput_OfAStreamTakenOnTheLoop_IsReadOffTheLoop_AndArrivesWhole()
    {
        var path = Path.GetTempFileName();
        try
        {
            var content = new byte[200_003];
            new Random(5).NextBytes(content);
            await File.WriteAllBytesAsync(path, content);
            using var loop = new TestEventLoop();
            var flushes = new FlushRecorder(loop);
            await using var peer = await Http2TestPeer.StartOnLoopAsync(new FileHandler(path), loop, metrics: flushes);
            // Small windows: the file goes out a window at a time, each resumed by a WINDOW_UPDATE the read loop (on the
            // loop) hands to the writer, so most file frames follow a wake on the loop.
            await peer.HandshakeAsync(new Proxy.Codecs.Http2.Http2Setting(Proxy.Codecs.Http2.Http2SettingsParameter.InitialWindowSize, 20_000));
            await peer.SendRequestHeadersAsync(1);

            var response = await peer.ReadResponseAsync(1);

            Assert.Equal(content, response.Body);
            // Only the HEADERS and control frames may leave from the loop; every flush that carried file frames ran off it.
            Assert.Contains(flushes.Flushes, f => f.Bytes > 16_000);
            Assert.DoesNotContain(flushes.Flushes, f => f.OnLoop && f.Bytes > 16_000);
        }
        finally
        {
            File.Delete(path);
        }
    }

    [Fact]
    public async Task ReadLoopOffTheLoop_StreamsGoToThePool_ThroughHandleAsync()
    {
        // The connection has an event-loop scheduler, but its read loop runs on the thread pool (as on the runtime's
        // socket engine): nothing can be deferred there, so each stream gets the whole handler on the pool.
        using var loop = new TestEventLoop();
        var handler = new SplitHandler(loop);
        await using var peer = await Http2TestPeer.StartAsync(handler, loop.Scheduler);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "GET", "/loop");
        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Headers[":status"]);
        Assert.Equal(["handle /loop"], handler.Calls.ToArray());
    }

    [Fact]
    public async Task ThreadPoolScheduler_NeverOffersOnTheLoop()
    {
        using var loop = new TestEventLoop();
        var handler = new SplitHandler(loop);
        await using var peer = await Http2TestPeer.StartAsync(handler, WorkScheduler.ThreadPool);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "GET", "/loop");
        await peer.ReadResponseAsync(1);

        Assert.Equal(["handle /loop"], handler.Calls.ToArray());
    }

    [Fact]
    public async Task TakenStream_WhoseOfferThrows_Answers500_AndTheConnectionCarriesOn()
    {
        using var loop = new TestEventLoop();
        var handler = new ThrowingOffer();
        await using var peer = await Http2TestPeer.StartOnLoopAsync(handler, loop);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "GET", "/throw");
        var failed = await peer.ReadResponseAsync(1);
        await peer.SendRequestHeadersAsync(3, "GET", "/fine");
        var fine = await peer.ReadResponseAsync(3);

        Assert.Equal("500", failed.Headers[":status"]);
        Assert.Equal("200", fine.Headers[":status"]);
    }

    private sealed class ThrowingOffer : IEventLoopRequestHandler
    {
        public Task? TryHandleOnEventLoop(HttpExchange exchange) =>
            exchange.RawTarget == "/throw" ? throw new InvalidOperationException("deciding failed") : null;

        public IHttpRequestHandler Declined { get; } = new DelegateRequestHandler(_ => Task.CompletedTask);

        public Task HandleAsync(HttpExchange exchange) => Task.CompletedTask;
    }
}
