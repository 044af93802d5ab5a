using System.Collections.Concurrent;
using Google.Protobuf;
using Microsoft.AspNetCore.Routing;
using Proxy.Demo.Grpc.Echo;

namespace Proxy.Demo.Grpc;

/// <summary>
/// The echo service of echo.proto on our framing layer, plus what the server saw of each Wait call
/// (how it ended), so tests can assert on both ends of a cancelled or timed-out call.
/// </summary>
// Shared by the calls of one host; every member is thread-safe.
public sealed class EchoService
{
    public const string ServiceName = "proxy.interop.Echo";

    private readonly ConcurrentDictionary<string, TaskCompletionSource<WaitOutcome>> _waits = new();

    /// <summary>How a Wait call ended on the server, and the deadline it parsed from grpc-timeout.</summary>
    public sealed record WaitOutcome(string EndedBy, TimeSpan? TimeoutFromHeader);

    /// <summary>Completes when the Wait call with <paramref name="callId"/> ended on the server.</summary>
    public Task<WaitOutcome> WaitOutcomeAsync(string callId) => WaitSlot(callId).Task;

    private TaskCompletionSource<WaitOutcome> WaitSlot(string callId) =>
        _waits.GetOrAdd(callId, _ => new TaskCompletionSource<WaitOutcome>(TaskCreationOptions.RunContinuationsAsynchronously));

    public void Map(IEndpointRouteBuilder routes)
    {
        routes.MapGrpcUnary(ServiceName, "Unary", EchoRequest.Parser, (request, _) => Task.FromResult(new EchoReply
        {
            Message = "echo: " + request.Message,
            Sequence = request.Sequence,
            Count = 1,
            Payload = request.Payload,
        }));

        routes.MapGrpcServerStreaming(ServiceName, "ServerStream", StreamRequest.Parser, async (request, call) =>
        {
            for (var i = 0; i < request.Count; i++)
            {
                await call.WriteMessageAsync(new EchoReply { Message = $"{request.Message} {i}", Sequence = i });
            }

            if (request.FailCode != 0)
            {
                throw new GrpcStatusException((GrpcStatusCode)request.FailCode, request.FailMessage);
            }
        });

        routes.MapGrpcClientStreaming(ServiceName, "ClientStream", async call =>
        {
            var messages = new List<string>();
            var payloadBytes = 0;
            await foreach (var request in call.ReadAllAsync(EchoRequest.Parser))
            {
                messages.Add(request.Message);
                payloadBytes += request.Payload.Length;
            }

            return new EchoReply { Message = string.Join(",", messages), Count = messages.Count, Sequence = payloadBytes };
        });

        routes.MapGrpcDuplex(ServiceName, "Bidi", async call =>
        {
            // Each reply is written (and flushed) as soon as its request arrives: a ping-pong client depends on it.
            await foreach (var request in call.ReadAllAsync(EchoRequest.Parser))
            {
                await call.WriteMessageAsync(new EchoReply { Message = "echo: " + request.Message, Sequence = request.Sequence });
            }
        });

        routes.MapGrpcDuplex(ServiceName, "BidiHeadersFirst", async call =>
        {
            await call.WriteResponseHeadersAsync(new Dictionary<string, string> { ["x-server-ready"] = "yes" });
            var count = 0;
            await foreach (var request in call.ReadAllAsync(EchoRequest.Parser))
            {
                await call.WriteMessageAsync(new EchoReply { Message = "echo: " + request.Message, Sequence = request.Sequence, Count = ++count });
            }

            call.ResponseTrailers["x-messages-seen"] = count.ToString();
        });

        routes.MapGrpcServerStreaming(ServiceName, "Wait", WaitRequest.Parser, async (request, call) =>
        {
            var timeout = call.Deadline is { } deadline ? deadline - DateTimeOffset.UtcNow : (TimeSpan?)null;
            for (var i = 0; i < request.RepliesFirst; i++)
            {
                await call.WriteMessageAsync(new EchoReply { Message = "waiting", Sequence = i });
            }

            try
            {
                await Task.Delay(Timeout.Infinite, call.CancellationToken);
            }
            catch (OperationCanceledException)
            {
                // NOTE: the client enforces the deadline too and resets the stream when it passes, so a deadline
                // can be seen either way; the outcome says which signal the server got first.
                var endedBy = call.DeadlineExceeded ? "deadline" : call.ClientCancelled ? "client-cancelled" : "unknown";
                WaitSlot(request.CallId).TrySetResult(new WaitOutcome(endedBy, timeout));
                throw;
            }
        });

        routes.MapGrpcUnary<FailRequest, EchoReply>(ServiceName, "Fail", FailRequest.Parser, (request, _) =>
            throw new GrpcStatusException((GrpcStatusCode)request.Code, request.Detail));
    }
}
