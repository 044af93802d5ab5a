using System.Buffers;
using System.Collections.Concurrent;
using System.Globalization;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;

namespace Proxy.Load.Server;

/// <summary>
/// The backend the scenarios hit: grpc.testing.BenchmarkService on Grpc.AspNetCore (<see cref="BenchmarkGrpcService"/>),
/// GET /size/{bytes}, POST /echo and GET /sse. Responses are cached per size so the backend does as little
/// work per request as the client.
/// </summary>
// Shared by every request of one host; every member is thread-safe.
public sealed class BenchmarkEndpoints : IAsyncDisposable
{
    public const string ServiceName = "grpc.testing.BenchmarkService";

    /// <summary>Largest response the backend builds.</summary>
    public const int MaxSize = BenchmarkGrpcService.MaxSize;

    private static readonly byte[] s_sseHello = ": ok\n\n"u8.ToArray();

    private readonly ConcurrentDictionary<int, byte[]> _bodies = new();
    // Keyed by the interval between events: ?rate=N and ?every=S streams of the same pace share one broadcaster.
    private readonly ConcurrentDictionary<TimeSpan, Lazy<SseBroadcaster>> _broadcasters = new();
    private readonly int _defaultSseRate;

    public BenchmarkEndpoints(int defaultSseRate = 10)
    {
        _defaultSseRate = defaultSseRate;
    }

    /// <summary>What <see cref="Map"/> needs in the container: Grpc.AspNetCore and the service (one instance).</summary>
    public static void AddServices(IServiceCollection services)
    {
        services.AddGrpc();
        services.AddSingleton<BenchmarkGrpcService>();
    }

    public void Map(IEndpointRouteBuilder routes)
    {
        routes.MapGet("/", () => $"Proxy.Load backend: {ServiceName}, GET /size/{{bytes}}, POST /echo, GET /sse?rate=N or ?every=S, GET /stream/{{bytes}}, POST /sink?rate=N.\n");
        routes.MapGrpcService<BenchmarkGrpcService>();
        routes.MapGet("/size/{bytes:int}", (HttpContext context, int bytes) => WriteBodyAsync(context, bytes));
        routes.MapPost("/echo", EchoAsync);
        routes.MapGet("/sse", SseAsync);
        routes.MapGet("/stream/{bytes:long}", StreamAsync);
        routes.MapPost("/sink", SinkAsync);
    }

    /// <summary>GET /stream/{bytes}: any number of bytes (up to terabytes), written 64 KiB at a time as fast as the reader takes them.</summary>
    private async Task StreamAsync(HttpContext context, long bytes)
    {
        var chunk = _bodies.GetOrAdd(64 * 1024, s => Filled(s));
        var response = context.Response;
        response.ContentType = "application/octet-stream";
        response.ContentLength = Math.Max(bytes, 0);
        var aborted = context.RequestAborted;
        for (var left = Math.Max(bytes, 0); left > 0; left -= chunk.Length)
        {
            await response.Body.WriteAsync(chunk.AsMemory(0, (int)Math.Min(chunk.Length, left)), aborted);
        }
    }

    /// <summary>
    /// POST /sink[?rate=bytes-per-second]: reads the request body no faster than the rate (unlimited without one) and
    /// answers how many bytes it read. A slow reader for the proxy's upload backpressure.
    /// </summary>
    private static async Task SinkAsync(HttpContext context)
    {
        var rate = long.TryParse(context.Request.Query["rate"], NumberStyles.None, CultureInfo.InvariantCulture, out var r) && r > 0 ? r : 0;
        if (context.Features.Get<Microsoft.AspNetCore.Http.Features.IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } limit)
        {
            limit.MaxRequestBodySize = null; // a sink takes any size (Kestrel's default limit is 30 MB)
        }

        var reader = context.Request.BodyReader;
        var aborted = context.RequestAborted;
        var started = System.Diagnostics.Stopwatch.GetTimestamp();
        long total = 0;
        while (true)
        {
            var result = await reader.ReadAsync(aborted);
            // At most 16 KiB per turn, so the rate holds even when the proxy sends large chunks.
            var take = result.Buffer.Slice(0, Math.Min(result.Buffer.Length, 16 * 1024));
            total += take.Length;
            reader.AdvanceTo(take.End);
            if (result.IsCompleted && take.Length == result.Buffer.Length)
            {
                break;
            }

            if (rate > 0)
            {
                // Ahead of the rate: wait until the bytes read so far are due.
                var due = TimeSpan.FromSeconds((double)total / rate) - System.Diagnostics.Stopwatch.GetElapsedTime(started);
                if (due > TimeSpan.Zero)
                {
                    await Task.Delay(due, aborted);
                }
            }
        }

        context.Response.ContentType = "text/plain";
        await context.Response.WriteAsync(total.ToString(CultureInfo.InvariantCulture) + "\n", aborted);
    }

    private Task WriteBodyAsync(HttpContext context, int bytes)
    {
        var body = _bodies.GetOrAdd(Math.Clamp(bytes, 0, MaxSize), s => Filled(s));
        context.Response.ContentType = "application/octet-stream";
        context.Response.ContentLength = body.Length;
        return context.Response.Body.WriteAsync(body, context.RequestAborted).AsTask();
    }

    private static byte[] Filled(int size)
    {
        var body = new byte[size];
        body.AsSpan().Fill((byte)'x');
        return body;
    }

    private static async Task EchoAsync(HttpContext context)
    {
        var request = context.Request;
        var response = context.Response;
        response.ContentType = "application/octet-stream";
        if (request.ContentLength is { } length)
        {
            response.ContentLength = length;
        }

        var reader = request.BodyReader;
        var writer = response.BodyWriter;
        var aborted = context.RequestAborted;
        while (true)
        {
            var result = await reader.ReadAsync(aborted);
            foreach (var segment in result.Buffer)
            {
                writer.Write(segment.Span);
            }

            reader.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                break;
            }

            await writer.FlushAsync(aborted);
        }

        await writer.FlushAsync(aborted);
    }

    /// <summary>The time between two events of <c>/sse</c>: <c>?every=S</c> seconds (quiet streams), else 1/<c>?rate=N</c>, else 1/the default rate.</summary>
    public static TimeSpan SseInterval(IQueryCollection query, int defaultRate)
    {
        if (int.TryParse(query["every"], NumberStyles.None, CultureInfo.InvariantCulture, out var every) && every > 0)
        {
            return TimeSpan.FromSeconds(every);
        }

        var rate = int.TryParse(query["rate"], NumberStyles.None, CultureInfo.InvariantCulture, out var r) && r > 0 ? r : defaultRate;
        return TimeSpan.FromSeconds(1.0 / rate);
    }

    private async Task SseAsync(HttpContext context)
    {
        var interval = SseInterval(context.Request.Query, _defaultSseRate);
        var broadcaster = _broadcasters.GetOrAdd(interval, i => new Lazy<SseBroadcaster>(() => new SseBroadcaster(i))).Value;

        var response = context.Response;
        var aborted = context.RequestAborted;
        response.ContentType = "text/event-stream";
        response.Headers.CacheControl = "no-cache";

        using var subscription = broadcaster.Subscribe();
        var writer = response.BodyWriter;
        try
        {
            // The comment makes the headers leave now: a client's SendAsync returns before the first event.
            writer.Write(s_sseHello);
            await writer.FlushAsync(aborted);
            var events = subscription.Events;
            while (await events.WaitToReadAsync(aborted))
            {
                while (events.TryRead(out var payload))
                {
                    writer.Write(payload);
                    await writer.FlushAsync(aborted);
                }
            }
        }
        catch (OperationCanceledException) when (aborted.IsCancellationRequested)
        {
            // The client went away.
        }
    }

    public async ValueTask DisposeAsync()
    {
        foreach (var lazy in _broadcasters.Values)
        {
            if (lazy.IsValueCreated)
            {
                await lazy.Value.DisposeAsync();
            }
        }
    }
}
