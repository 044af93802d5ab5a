using System.Collections.Concurrent;
using Google.Protobuf;
using Grpc.Core;
using Proxy.Load.Protos;

namespace Proxy.Load.Server;

/// <summary>
/// grpc.testing.BenchmarkService on Grpc.AspNetCore: the service every gRPC scenario calls, on our server and on
/// Kestrel alike. Responses are built once per size and shared, so the backend does as little work per call as
/// the client does.
/// </summary>
// A singleton (registered by BenchmarkEndpoints.AddServices); the response cache is thread-safe.
public sealed class BenchmarkGrpcService : BenchmarkService.BenchmarkServiceBase
{
    /// <summary>Largest response payload the service builds (the gRPC receive limit is 4 MiB).</summary>
    public const int MaxSize = 4 * 1024 * 1024 - 64;

    private readonly ConcurrentDictionary<int, SimpleResponse> _responses = new();

    public override Task<SimpleResponse> UnaryCall(SimpleRequest request, ServerCallContext context) =>
        Task.FromResult(ResponseOfSize(request.ResponseSize));

    public override async Task StreamingFromServer(
        SimpleRequest request, IServerStreamWriter<SimpleResponse> responseStream, ServerCallContext context)
    {
        // Until the client cancels: its RST_STREAM cancels the token, or the write throws and ends the call.
        var response = ResponseOfSize(request.ResponseSize);
        var aborted = context.CancellationToken;
        var inARow = 0;
        try
        {
            while (!aborted.IsCancellationRequested)
            {
                var write = responseStream.WriteAsync(response, aborted);
                // NOTE: after the client's reset Kestrel completes writes at once and drops them, and it cancels the token
                // from a thread-pool work item. Seventy loops that never yield held every pool thread, so that item waited
                // 10-20 s or more while the backend spun at full CPU (session 18): yield now and then.
                if (write.IsCompleted && ++inARow == 64)
                {
                    inARow = 0;
                    await Task.Yield();
                }
                await write;
            }
        }
        catch (InvalidOperationException) when (aborted.IsCancellationRequested)
        {
            // NOTE: the reset can land between the loop's check and the write, which then refuses with "the request
            // is complete" (not an OperationCanceledException, so Grpc.AspNetCore would log it as a service error).
            // It is how every call of this method ends, not a failure.
        }
    }

    public override async Task StreamingCall(
        IAsyncStreamReader<SimpleRequest> requestStream, IServerStreamWriter<SimpleResponse> responseStream, ServerCallContext context)
    {
        // Ping-pong: each reply is written (and flushed) as its request arrives; the call ends with the request stream.
        var aborted = context.CancellationToken;
        while (await requestStream.MoveNext(aborted))
        {
            await responseStream.WriteAsync(ResponseOfSize(requestStream.Current.ResponseSize), aborted);
        }
    }

    private SimpleResponse ResponseOfSize(int size)
    {
        size = Math.Clamp(size, 0, MaxSize);
        // Shared across calls: serialising a message only reads it.
        return _responses.GetOrAdd(size, static s => new SimpleResponse { Payload = ByteString.CopyFrom(new byte[s]) });
    }
}
