using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests;

/// <summary>
/// An SSE endpoint that writes one event, flushes, then waits for the test's signal before the next.
/// </summary>
// Shared by the SSE requests of one host and the test that signals them; every member is thread-safe.
public sealed class SseAppFixture : HostFixture
{
    public const int EventCount = 3;

    private readonly ConcurrentDictionary<string, SemaphoreSlim> _signals = new();

    /// <summary>Lets session <paramref name="id"/> write its next event.</summary>
    public void Signal(string id) => SignalFor(id).Release();

    private SemaphoreSlim SignalFor(string id) => _signals.GetOrAdd(id, _ => new SemaphoreSlim(0));

    protected override void MapEndpoints(WebApplication app)
    {
        app.MapGet("/sse/{id}", async (HttpContext ctx, string id) =>
        {
            ctx.Response.ContentType = "text/event-stream";
            ctx.Response.Headers.CacheControl = "no-cache";
            var signal = SignalFor(id);
            for (var i = 0; i < EventCount; i++)
            {
                if (i > 0 && !await signal.WaitAsync(TimeSpan.FromSeconds(15), ctx.RequestAborted))
                {
                    // The test never asked for this event: end the stream so the client sees it fail.
                    return;
                }

                await ctx.Response.WriteAsync($"id: {i}\ndata: event {i} over {ctx.Request.Protocol}\n\n", ctx.RequestAborted);
                await ctx.Response.Body.FlushAsync(ctx.RequestAborted);
            }
        });
    }
}

public sealed class SseTests(SseAppFixture fixture) : IClassFixture<SseAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Tls, HttpTransport.Http2Cleartext, HttpTransport.Http11Cleartext);

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Get_EventStream_EachEventArrivesBeforeTheNextIsWritten(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);
        var id = Guid.NewGuid().ToString("N");

        using var response = await client.GetAsync($"/sse/{id}", HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(transport.Version(), response.Version);
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType?.MediaType);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());

        for (var i = 0; i < SseAppFixture.EventCount; i++)
        {
            if (i > 0)
            {
                // The server is parked until now: the event we just read cannot have been held back
                // waiting for more output or for the end of the response.
                fixture.Signal(id);
            }

            var lines = await ReadEventAsync(reader, TimeSpan.FromSeconds(10));
            Assert.Equal([$"id: {i}", $"data: event {i} over {transport.RequestProtocol()}"], lines);
        }

        // After the last event the server completes the response.
        using var end = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        Assert.Null(await reader.ReadLineAsync(end.Token));
    }

    private static async Task<List<string>> ReadEventAsync(StreamReader reader, TimeSpan timeout)
    {
        using var cts = new CancellationTokenSource(timeout);
        var lines = new List<string>();
        while (true)
        {
            string? line;
            try
            {
                line = await reader.ReadLineAsync(cts.Token);
            }
            catch (OperationCanceledException)
            {
                throw new TimeoutException($"No complete SSE event within {timeout}; got so far: [{string.Join(" | ", lines)}]");
            }

            if (line is null)
            {
                throw new EndOfStreamException($"Stream ended inside an event; got: [{string.Join(" | ", lines)}]");
            }

            if (line.Length == 0)
            {
                return lines;
            }

            lines.Add(line);
        }
    }
}
