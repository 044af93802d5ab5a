using System.Net;
using System.Net.Sockets;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// Many SSE streams at once through the native relay (1,000 with HTTP/2 behind): more than one HTTP/2 connection's worth
/// on both sides (the proxy and Kestrel allow 100 streams per connection), every stream open at the backend before the first event, each event written
/// only when the test says so and read by every client before the next.
/// </summary>
public sealed class RelaySseTests
{
    private const int Events = 3;

    [Theory]
    [InlineData("h2", 1000)] // ten connections' worth on each side
    [InlineData("h1", 200)]  // one backend connection per stream
    public async Task ManyStreams_EventsReleasedRoundByRound_EveryEventArrivesIntact(string backendProtocol, int streams)
    {
        var rounds = Enumerable.Range(0, Events).Select(_ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously)).ToArray();
        var opened = 0;
        var completed = 0;
        await using var backend = await TestHost.StartAsync(ServerKind.Kestrel, app => app.MapGet("/sse/{id:int}", async (HttpContext context, int id) =>
        {
            Interlocked.Increment(ref opened);
            context.Response.ContentType = "text/event-stream";
            context.Response.Headers.CacheControl = "no-cache";
            await context.Response.StartAsync(context.RequestAborted);
            await context.Response.Body.FlushAsync(context.RequestAborted);
            for (var round = 0; round < Events; round++)
            {
                await rounds[round].Task.WaitAsync(context.RequestAborted);
                await context.Response.WriteAsync($"id: {round}\ndata: stream {id} event {round}\n\n", context.RequestAborted);
                await context.Response.Body.FlushAsync(context.RequestAborted);
            }

            Interlocked.Increment(ref completed);
        }), https: false);
        var h2 = backendProtocol == "h2";
        await using var proxy = await RelayProxy.StartAsync(new ReverseProxyKeys()
            .NativeRoute("sse", "sse", (h2 ? backend.H2cAddress : backend.HttpAddress).ToString(), h2c: h2));
        var connections = 0;
        using var client = RelayProxy.CreateClient(proxy, handler =>
        {
            handler.EnableMultipleHttp2Connections = true;
            handler.ConnectCallback = async (context, cancellationToken) =>
            {
                Interlocked.Increment(ref connections);
                var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
                try
                {
                    await socket.ConnectAsync(context.DnsEndPoint, cancellationToken);
                }
                catch
                {
                    socket.Dispose();
                    throw;
                }

                return new NetworkStream(socket, ownsSocket: true);
            };
        });

        var responses = await Task.WhenAll(Enumerable.Range(0, streams).Select(i =>
            client.GetAsync($"/sse/{i}", HttpCompletionOption.ResponseHeadersRead))).WaitAsync(RelayProxy.Bound);
        try
        {
            // Every head arrived, so every handler is running: every stream open end to end, no event written yet.
            Assert.Equal(streams, Volatile.Read(ref opened));
            Assert.All(responses, r =>
            {
                Assert.Equal(HttpStatusCode.OK, r.StatusCode);
                Assert.Equal(HttpVersion.Version20, r.Version);
                Assert.Equal("text/event-stream", r.Content.Headers.ContentType?.MediaType);
            });
            Assert.True(connections >= 2, $"The client used {connections} connection(s) for {streams} streams.");
            var readers = await Task.WhenAll(responses.Select(async r => new StreamReader(await r.Content.ReadAsStreamAsync())));

            for (var round = 0; round < Events; round++)
            {
                rounds[round].TrySetResult();
                var current = round;
                var events = await Task.WhenAll(readers.Select(ReadEventAsync)).WaitAsync(RelayProxy.Bound);
                Assert.All(Enumerable.Range(0, streams), i => Assert.Equal($"id: {current}|data: stream {i} event {current}", events[i]));
            }

            // After the last event each backend response ends, and so does each relayed one.
            var ends = await Task.WhenAll(readers.Select(r => r.ReadLineAsync())).WaitAsync(RelayProxy.Bound);
            Assert.All(ends, Assert.Null);
            Assert.Equal(streams, Volatile.Read(ref completed));
        }
        finally
        {
            foreach (var response in responses)
            {
                response.Dispose();
            }
        }
    }

    /// <summary>One event: its lines joined with '|', up to the blank line that ends it.</summary>
    private static async Task<string> ReadEventAsync(StreamReader reader)
    {
        var lines = new List<string>();
        while (await reader.ReadLineAsync() is { Length: > 0 } line)
        {
            lines.Add(line);
        }

        return string.Join('|', lines);
    }
}
