using System.Buffers;
using System.Collections.Concurrent;
using System.Text;
using Microsoft.Extensions.Time.Testing;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// Streams that closed normally are reused for the connection's next streams. Each life must start clean: request
/// and response state, windows, cancellation; and a stream that was reset must never come back.
/// </summary>
public class Http2StreamPoolTests
{
    [Fact]
    public async Task SequentialStreams_ReuseTheExchange_EachLifeStartsClean()
    {
        var exchanges = new List<HttpExchange>();
        var problems = new ConcurrentQueue<string>();
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchanges.Add(exchange);
            var index = exchange.RequestHeaders.Get("x-index");
            if (exchange.HasResponseStarted) problems.Enqueue($"{index}: response already started");
            if (exchange.StatusCode != 200) problems.Enqueue($"{index}: status {exchange.StatusCode}");
            if (exchange.ResponseHeaders.Count != 0) problems.Enqueue($"{index}: response headers {exchange.ResponseHeaders.Count}");
            if (exchange.ResponseTrailers.Count != 0) problems.Enqueue($"{index}: response trailers");
            if (exchange.RequestHeaders.Count(h => h.Key == "x-index") != 1) problems.Enqueue($"{index}: request headers {exchange.RequestHeaders.Count}");
            if (exchange.RequestAborted.IsCancellationRequested) problems.Enqueue($"{index}: aborted");
            if (exchange.RawTarget != "/item/" + index) problems.Enqueue($"{index}: target {exchange.RawTarget}");

            var body = new MemoryStream();
            while (true)
            {
                var read = await exchange.RequestBody.ReadAsync();
                foreach (var segment in read.Buffer) body.Write(segment.Span);
                exchange.RequestBody.AdvanceTo(read.Buffer.End);
                if (read.IsCompleted) break;
            }
            if (exchange.RequestTrailers.Get("x-request-trailer") is { } requestTrailer && requestTrailer != index)
            {
                problems.Enqueue($"{index}: request trailer {requestTrailer}");
            }

            exchange.StatusCode = 201;
            exchange.ResponseHeaders.Add("x-echo", index!);
            exchange.ResponseTrailers.Add("x-trailer", index!);
            await exchange.ResponseBody.WriteAsync(body.ToArray());
        });
        await peer.HandshakeAsync();

        for (var i = 0; i < 6; i++)
        {
            var id = 1 + 2 * i;
            var payload = Encoding.ASCII.GetBytes($"body of request {i}");
            await peer.SendRequestHeadersAsync(id, "POST", $"/item/{i}", endStream: false, ("x-index", i.ToString()));
            await peer.SendDataAsync(id, payload, endStream: i % 2 == 0);
            if (i % 2 == 1)
            {
                await peer.SendHeadersAsync(id, [new("x-request-trailer", i.ToString())], endStream: true);
            }

            var response = await peer.ReadResponseAsync(id);

            Assert.Equal("201", response.Headers[":status"]);
            Assert.Equal(i.ToString(), response.Headers["x-echo"]);
            Assert.Equal(payload, response.Body);
            Assert.Equal(i.ToString(), response.Trailers?["x-trailer"]);
        }

        Assert.Empty(problems);
        Assert.True(exchanges.Distinct().Count() < exchanges.Count, "closed streams were not reused");
    }

    [Fact]
    public async Task ReusedStreams_GetAndPostAlternate_BodylessRequestsReadEmptyAndBodiesArriveWhole()
    {
        // A request that ends with its headers has no body pipe (it reads a shared empty body); a later request with a
        // body on the same pooled stream gets one. Alternate them so each kind follows the other on a reused stream.
        var exchanges = new List<HttpExchange>();
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchanges.Add(exchange);
            var body = new MemoryStream();
            var reads = 0;
            while (true)
            {
                var read = await exchange.RequestBody.ReadAsync();
                reads++;
                foreach (var segment in read.Buffer) body.Write(segment.Span);
                exchange.RequestBody.AdvanceTo(read.Buffer.End);
                if (read.IsCompleted) break;
            }
            if (exchange.Method == "GET")
            {
                // Still complete and empty when read again, and after the app completes it.
                Assert.True(exchange.RequestBody.TryRead(out var again) && again.IsCompleted && again.Buffer.IsEmpty);
                exchange.RequestBody.AdvanceTo(again.Buffer.End);
            }
            exchange.RequestBody.Complete();
            exchange.ResponseHeaders.Add("x-reads", reads.ToString());
            await exchange.ResponseBody.WriteAsync(body.ToArray());
        });
        await peer.HandshakeAsync();

        for (var i = 0; i < 8; i++)
        {
            var id = 1 + 2 * i;
            if (i % 2 == 0)
            {
                await peer.SendRequestHeadersAsync(id, "GET", $"/item/{i}", endStream: true);
                var response = await peer.ReadResponseAsync(id);
                Assert.Equal("200", response.Headers[":status"]);
                Assert.Equal("1", response.Headers["x-reads"]);
                Assert.Empty(response.Body);
            }
            else
            {
                var payload = Encoding.ASCII.GetBytes(new string((char)('a' + i), 5000 + i));
                await peer.SendRequestHeadersAsync(id, "POST", $"/item/{i}", endStream: false);
                await peer.SendDataAsync(id, payload, endStream: true);
                var response = await peer.ReadResponseAsync(id);
                Assert.Equal("200", response.Headers[":status"]);
                Assert.Equal(payload, response.Body);
            }
        }
        Assert.True(exchanges.Distinct().Count() < exchanges.Count, "closed streams were not reused");
    }

    [Fact]
    public async Task ReusedStream_StartsWithAFreshSendWindow()
    {
        // The peer allows 1,000 bytes per stream and never returns stream credit: a life that inherited the last
        // life's spent window would stall.
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
            exchange.ResponseBody.WriteAsync(new byte[900]).AsTask());
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1000));

        for (var i = 0; i < 5; i++)
        {
            var id = 1 + 2 * i;
            await peer.SendRequestHeadersAsync(id);
            await peer.ExpectHeadersAsync(id);
            var received = 0;
            var ended = false;
            while (!ended)
            {
                var data = (await peer.ExpectDataAsync(id)).AsData();
                received += (int)data.Data.Length;
                ended = data.EndStream;
            }
            Assert.Equal(900, received);
            await peer.SendWindowUpdateAsync(0, 900); // connection credit only
        }
    }

    [Fact]
    public async Task ResetStream_IsNotReused_AndItsCancellationNeverReachesALaterStream()
    {
        var exchanges = new ConcurrentQueue<HttpExchange>();
        var firstCanceled = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var laterAborted = new ConcurrentQueue<int>();
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchanges.Enqueue(exchange);
            if (exchange.RawTarget == "/hang")
            {
                try
                {
                    await Task.Delay(Timeout.Infinite, exchange.RequestAborted);
                }
                catch (OperationCanceledException)
                {
                    firstCanceled.SetResult();
                }
                return;
            }
            exchange.RequestAborted.Register(() => laterAborted.Enqueue(exchange.StreamIdForTest()));
            await Task.Delay(20);
            await exchange.ResponseBody.WriteAsync(Encoding.ASCII.GetBytes("fine"));
        });
        await peer.HandshakeAsync();
        // Two normal streams first, so the pool has a stream to hand out.
        for (var id = 1; id <= 3; id += 2)
        {
            await peer.SendRequestHeadersAsync(id, path: "/ok");
            Assert.Equal("fine", (await peer.ReadResponseAsync(id)).BodyText);
        }
        await peer.SendRequestHeadersAsync(5, path: "/hang");
        await peer.SendRstStreamAsync(5, Http2ErrorCode.Cancel);
        await firstCanceled.Task.WaitAsync(peer.ReceiveTimeout);
        var reset = exchanges.Last();

        for (var id = 7; id <= 11; id += 2)
        {
            await peer.SendRequestHeadersAsync(id, path: "/ok");
            Assert.Equal("fine", (await peer.ReadResponseAsync(id)).BodyText);
        }

        // Earlier lives may share the object (streams 1 and 3 went back to the pool); after the reset, it is gone.
        var lives = exchanges.ToArray();
        Assert.Equal(6, lives.Length);
        Assert.DoesNotContain(lives[3..], e => ReferenceEquals(e, reset));
        Assert.Empty(laterAborted);
    }

    [Fact]
    public async Task WavesOf70Streams_TheSecondWaveReusesEveryStreamOfTheFirst()
    {
        // gRPC channels run many streams at once and in waves: a pool smaller than a wave drops the rest of it.
        const int wave = 70;
        var exchanges = new ConcurrentQueue<HttpExchange>();
        // Each wave's handlers answer only once all of its streams run, so no stream of a wave finishes (and is reused)
        // before the wave's last one opened.
        var allRunning = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            exchanges.Enqueue(exchange);
            if (exchanges.Count == wave)
            {
                Volatile.Read(ref allRunning).TrySetResult();
            }
            await Volatile.Read(ref allRunning).Task;
            await exchange.ResponseBody.WriteAsync("ok"u8.ToArray());
        });
        await peer.HandshakeAsync();

        await RunWaveAsync(peer, firstId: 1, wave);
        var first = exchanges.ToHashSet();
        Assert.Equal(wave, first.Count);
        await WaitForPoolAsync(peer, wave, "the first wave's streams back in the pool");
        Volatile.Write(ref allRunning, new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously));
        exchanges.Clear();

        await RunWaveAsync(peer, firstId: 1 + 2 * wave, wave);

        Assert.Equal(wave, exchanges.Count);
        Assert.All(exchanges, e => Assert.Contains(e, first));
    }

    [Fact]
    public async Task PooledStream_NotReusedWithinFiveSeconds_IsDropped()
    {
        var time = new FakeTimeProvider();
        var exchanges = new List<HttpExchange>();
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            lock (exchanges) exchanges.Add(exchange);
            await exchange.ResponseBody.WriteAsync("ok"u8.ToArray());
        }, time: time);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1);
        Assert.Equal("ok", (await peer.ReadResponseAsync(1)).BodyText);
        await WaitForPoolAsync(peer, 1, "stream 1 in the pool");
        time.Advance(Http2Connection.PooledStreamExpiry - TimeSpan.FromMilliseconds(1));
        await peer.SendRequestHeadersAsync(3);
        Assert.Equal("ok", (await peer.ReadResponseAsync(3)).BodyText);
        await WaitForPoolAsync(peer, 1, "stream 3 in the pool");

        time.Advance(Http2Connection.PooledStreamExpiry);
        await WaitForPoolAsync(peer, 0, "the idle connection's pool emptied");
        await peer.SendRequestHeadersAsync(5);
        Assert.Equal("ok", (await peer.ReadResponseAsync(5)).BodyText);

        lock (exchanges)
        {
            Assert.Same(exchanges[0], exchanges[1]); // reused just before the expiry
            Assert.NotSame(exchanges[1], exchanges[2]); // dropped after it
        }
    }

    /// <summary>Opens <paramref name="count"/> streams at once and reads every response, in whatever order they come.</summary>
    private static async Task RunWaveAsync(Http2TestPeer peer, int firstId, int count)
    {
        var open = new HashSet<int>();
        for (var i = 0; i < count; i++)
        {
            var id = firstId + 2 * i;
            open.Add(id);
            await peer.SendRequestHeadersAsync(id);
        }

        while (open.Count > 0)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            if (frame.Type == Http2FrameType.Headers)
            {
                await peer.DecodeHeaderBlockAsync(frame); // keeps the HPACK table in step
            }

            if (frame.EndStream)
            {
                Assert.True(open.Remove(frame.StreamId), $"unexpected end of stream {frame.StreamId}");
            }
        }
    }

    /// <summary>
    /// Completes when the connection's pool holds <paramref name="count"/> streams: checked each time the read loop
    /// changes the pool, and once after the hook is set (for a count reached before). The limit only turns a hang
    /// into a failure.
    /// </summary>
    private static async Task WaitForPoolAsync(Http2TestPeer peer, int count, string what)
    {
        var connection = peer.Connection;
        var reached = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        connection.PoolChanged = () =>
        {
            if (connection.PooledStreamCount == count)
            {
                reached.TrySetResult();
            }
        };
        try
        {
            if (connection.PooledStreamCount == count)
            {
                reached.TrySetResult();
            }

            await reached.Task.WaitAsync(TimeSpan.FromSeconds(20));
        }
        catch (TimeoutException)
        {
            throw new Xunit.Sdk.XunitException($"Not reached within 20 s: {what} ({connection.PooledStreamCount} pooled, {count} expected).");
        }
        finally
        {
            connection.PoolChanged = null;
        }
    }
}

internal static class ExchangeTestExtensions
{
    public static int StreamIdForTest(this HttpExchange exchange) => ((Http2Stream)exchange).StreamId;
}
