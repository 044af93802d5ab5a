using System.Buffers;
using System.Collections.Concurrent;
using System.Globalization;
using Google.Protobuf;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Proxy.Load.Server.HandMadeGrpc;
using Proxy.Load.Protos;

namespace Proxy.Load.Server;

/// <summary>
/// The backend the scenarios hit: grpc.testing.BenchmarkService on the hand-made gRPC framing layer in Server/HandMadeGrpc (moved from src/Proxy.Demo),
/// GET /size/{bytes}, POST /echo and GET /sse. Responses are cached per size so the backend does as little
/// work per request as the client.
/// </summary>
// Shared by every request of one host; every member is thread-safe.
public sealed class BenchmarkEndpoints : IAsyncDisposable
{
    public const string ServiceName = "grpc.testing.BenchmarkService";

    /// <summary>Largest response the backend builds (the gRPC receive limit is 4 MiB).</summary>
    public const int MaxSize = 4 * 1024 * 1024 - 64;

    private static readonly byte[] s_sseHello = ": ok\n\n"u8.ToArray();

    private readonly ConcurrentDictionary<int, SimpleResponse> _responses = new();
    private readonly ConcurrentDictionary<int, byte[]> _bodies = new();
    private readonly ConcurrentDictionary<int, Lazy<SseBroadcaster>> _broadcasters = new();
    private readonly int _defaultSseRate;

    public BenchmarkEndpoints(int defaultSseRate = 10)
    {
        _defaultSseRate = defaultSseRate;
    }

    public void Map(IEndpointRouteBuilder routes)
    {
        routes.MapGet("/", () => $"Proxy.Load backend: {ServiceName}, GET /size/{{bytes}}, POST /echo, GET /sse?rate=N.\n");

        routes.MapGrpcUnary(ServiceName, "UnaryCall", SimpleRequest.Parser,
            (request, _) => Task.FromResult(ResponseOfSize(request.ResponseSize)));

        routes.MapGrpcServerStreaming(ServiceName, "StreamingFromServer", SimpleRequest.Parser, async (request, call) =>
        {
            // Until the client cancels (the write then throws and the call ends without a status).
            var response = ResponseOfSize(request.ResponseSize);
            while (true)
            {
                await call.WriteMessageAsync(response);
            }
        });

        routes.MapGrpcDuplex(ServiceName, "StreamingCall", async call =>
        {
            while (await call.ReadMessageAsync(SimpleRequest.Parser) is { } request)
            {
                await call.WriteMessageAsync(ResponseOfSize(request.ResponseSize));
            }
        });

        routes.MapGet("/size/{bytes:int}", (HttpContext context, int bytes) => WriteBodyAsync(context, bytes));
        routes.MapPost("/echo", EchoAsync);
        routes.MapGet("/sse", SseAsync);
    }

    private SimpleResponse ResponseOfSize(int size)
    {
        size = Math.Clamp(size, 0, MaxSize);
        // Shared across calls: serialising a message only reads it.
        return _responses.GetOrAdd(size, s => new SimpleResponse { Payload = ByteString.CopyFrom(new byte[s]) });
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

    private async Task SseAsync(HttpContext context)
    {
        var rate = int.TryParse(context.Request.Query["rate"], NumberStyles.None, CultureInfo.InvariantCulture, out var r) && r > 0
            ? r
            : _defaultSseRate;
        var broadcaster = _broadcasters.GetOrAdd(rate, n => new Lazy<SseBroadcaster>(() => new SseBroadcaster(n))).Value;

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
