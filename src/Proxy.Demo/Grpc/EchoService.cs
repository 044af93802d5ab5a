using System.Collections.Concurrent;
using Grpc.Core;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Demo.Grpc.Echo;
using EchoBase = Proxy.Demo.Grpc.Echo.Echo.EchoBase;

namespace Proxy.Demo.Grpc;

/// <summary>
/// The echo service of echo.proto on Grpc.AspNetCore, plus what the server saw of each Wait call (how it
/// ended), so tests can assert on both ends of a cancelled or timed-out call.
/// </summary>
// One instance per host (a DI singleton, see AddEchoService), shared by its calls; every member is thread-safe.
public sealed class EchoService : EchoBase
{
    public const string ServiceName = "proxy.interop.Echo";

    private readonly ConcurrentDictionary<string, TaskCompletionSource<WaitOutcome>> _waits = new();

    /// <summary>How a Wait call ended on the server, and the deadline it read from grpc-timeout.</summary>
    public sealed record WaitOutcome(string EndedBy, TimeSpan? TimeoutFromHeader);

    /// <summary>Completes when the Wait call with <paramref name="callId"/> ended on the server.</summary>
    public Task<WaitOutcome> WaitOutcomeAsync(string callId) => WaitSlot(callId).Task;

    private TaskCompletionSource<WaitOutcome> WaitSlot(string callId) =>
        _waits.GetOrAdd(callId, _ => new TaskCompletionSource<WaitOutcome>(TaskCreationOptions.RunContinuationsAsynchronously));

    public override Task<EchoReply> Unary(EchoRequest request, ServerCallContext context) =>
        Task.FromResult(new EchoReply
        {
            Message = "echo: " + request.Message,
            Sequence = request.Sequence,
            Count = 1,
            Payload = request.Payload,
        });

    public override async Task ServerStream(StreamRequest request, IServerStreamWriter<EchoReply> responseStream, ServerCallContext context)
    {
        for (var i = 0; i < request.Count; i++)
        {
            await responseStream.WriteAsync(new EchoReply { Message = $"{request.Message} {i}", Sequence = i });
        }

        if (request.FailCode != 0)
        {
            throw new RpcException(new Status((StatusCode)request.FailCode, request.FailMessage));
        }
    }

    public override async Task<EchoReply> ClientStream(IAsyncStreamReader<EchoRequest> requestStream, ServerCallContext context)
    {
        var messages = new List<string>();
        var payloadBytes = 0;
        await foreach (var request in requestStream.ReadAllAsync(context.CancellationToken))
        {
            messages.Add(request.Message);
            payloadBytes += request.Payload.Length;
        }

        return new EchoReply { Message = string.Join(",", messages), Count = messages.Count, Sequence = payloadBytes };
    }

    public override async Task Bidi(IAsyncStreamReader<EchoRequest> requestStream, IServerStreamWriter<EchoReply> responseStream, ServerCallContext context)
    {
        // Each reply is written (and flushed) as soon as its request arrives: a ping-pong client depends on it.
        await foreach (var request in requestStream.ReadAllAsync(context.CancellationToken))
        {
            await responseStream.WriteAsync(new EchoReply { Message = "echo: " + request.Message, Sequence = request.Sequence });
        }
    }

    public override async Task BidiHeadersFirst(IAsyncStreamReader<EchoRequest> requestStream, IServerStreamWriter<EchoReply> responseStream, ServerCallContext context)
    {
        // Sent before any request message is read: a client that waits for metadata before it writes must see it.
        await context.WriteResponseHeadersAsync(new Metadata { { "x-server-ready", "yes" } });
        var count = 0;
        await foreach (var request in requestStream.ReadAllAsync(context.CancellationToken))
        {
            await responseStream.WriteAsync(new EchoReply { Message = "echo: " + request.Message, Sequence = request.Sequence, Count = ++count });
        }

        context.ResponseTrailers.Add("x-messages-seen", count.ToString(System.Globalization.CultureInfo.InvariantCulture));
    }

    public override async Task Wait(WaitRequest request, IServerStreamWriter<EchoReply> responseStream, ServerCallContext context)
    {
        // Grpc.AspNetCore reports "no deadline" as DateTime.MaxValue.
        var timeout = context.Deadline == DateTime.MaxValue ? (TimeSpan?)null : context.Deadline - DateTime.UtcNow;
        for (var i = 0; i < request.RepliesFirst; i++)
        {
            await responseStream.WriteAsync(new EchoReply { Message = "waiting", Sequence = i });
        }

        try
        {
            await Task.Delay(Timeout.Infinite, context.CancellationToken);
        }
        catch (OperationCanceledException)
        {
            // NOTE: the deadline is read from the clock, not from RequestAborted: on a deadline Grpc.AspNetCore
            // resets the stream itself before it cancels the call's token, and a client that enforces the deadline
            // too resets it as well, so RequestAborted is set either way. A call without a deadline can only have
            // been ended by its client (or a proxy on its behalf).
            var endedBy = DateTime.UtcNow >= context.Deadline ? "deadline" : "client-cancelled";
            WaitSlot(request.CallId).TrySetResult(new WaitOutcome(endedBy, timeout));
            throw;
        }
    }

    public override Task<EchoReply> Fail(FailRequest request, ServerCallContext context) =>
        throw new RpcException(new Status((StatusCode)request.Code, request.Detail));
}

/// <summary>Registers and maps the echo service the way any Grpc.AspNetCore service is.</summary>
public static class EchoServiceExtensions
{
    /// <summary>
    /// <c>AddGrpc()</c> and the service as a singleton (<paramref name="instance"/>, or a new one), so the host
    /// and its tests share one record of Wait outcomes.
    /// </summary>
    public static IServiceCollection AddEchoService(this IServiceCollection services, EchoService? instance = null)
    {
        services.AddGrpc();
        services.AddSingleton(instance ?? new EchoService());
        return services;
    }

    /// <summary><c>MapGrpcService&lt;EchoService&gt;()</c>: POST /proxy.interop.Echo/{method}.</summary>
    public static GrpcServiceEndpointConventionBuilder MapEchoService(this IEndpointRouteBuilder routes) =>
        routes.MapGrpcService<EchoService>();
}
