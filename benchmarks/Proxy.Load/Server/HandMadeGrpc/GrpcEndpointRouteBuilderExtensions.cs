using Google.Protobuf;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;

namespace Proxy.Load.Server.HandMadeGrpc;

/// <summary>
/// Maps gRPC methods as plain ASP.NET Core endpoints at POST /{service}/{method}: the load harness's hand-made
/// gRPC layer, moved here from src/Proxy.Demo when the demo moved to Grpc.AspNetCore; it stays only until the
/// harness's own gRPC scenarios move to Grpc.AspNetCore too (issue 10). It runs on any server that supports
/// HTTP/2 trailers.
/// </summary>
public static class GrpcEndpointRouteBuilderExtensions
{
    public static IEndpointConventionBuilder MapGrpcUnary<TRequest, TResponse>(
        this IEndpointRouteBuilder routes, string service, string method, MessageParser<TRequest> parser,
        Func<TRequest, GrpcServerCallContext, Task<TResponse>> handler)
        where TRequest : class, IMessage<TRequest>
        where TResponse : IMessage =>
        routes.MapPost($"/{service}/{method}", http => GrpcCall.RunAsync(http, async call =>
        {
            var request = await call.ReadSingleAsync(parser);
            var response = await handler(request, call);
            await call.WriteMessageAsync(response);
        }));

    public static IEndpointConventionBuilder MapGrpcServerStreaming<TRequest>(
        this IEndpointRouteBuilder routes, string service, string method, MessageParser<TRequest> parser,
        Func<TRequest, GrpcServerCallContext, Task> handler)
        where TRequest : class, IMessage<TRequest> =>
        routes.MapPost($"/{service}/{method}", http => GrpcCall.RunAsync(http, async call =>
        {
            var request = await call.ReadSingleAsync(parser);
            await handler(request, call);
        }));

    public static IEndpointConventionBuilder MapGrpcClientStreaming<TResponse>(
        this IEndpointRouteBuilder routes, string service, string method,
        Func<GrpcServerCallContext, Task<TResponse>> handler)
        where TResponse : IMessage =>
        routes.MapPost($"/{service}/{method}", http => GrpcCall.RunAsync(http, async call =>
        {
            var response = await handler(call);
            await call.WriteMessageAsync(response);
        }));

    /// <summary>Bidirectional streaming: the handler reads and writes through the call context.</summary>
    public static IEndpointConventionBuilder MapGrpcDuplex(
        this IEndpointRouteBuilder routes, string service, string method,
        Func<GrpcServerCallContext, Task> handler) =>
        routes.MapPost($"/{service}/{method}", http => GrpcCall.RunAsync(http, handler));
}

/// <summary>The per-call pipeline: validate, set up deadline and cancellation, run, send the status.</summary>
internal static class GrpcCall
{
    public static async Task RunAsync(HttpContext http, Func<GrpcServerCallContext, Task> body)
    {
        var request = http.Request;
        var response = http.Response;

        // PROTOCOL-HTTP2.md: a server SHOULD answer a non-gRPC content-type with HTTP 415.
        if (!GrpcProtocol.IsGrpcContentType(request.ContentType))
        {
            response.StatusCode = StatusCodes.Status415UnsupportedMediaType;
            response.Headers[GrpcProtocol.StatusHeader] = ((int)GrpcStatusCode.Internal).ToString();
            response.Headers[GrpcProtocol.MessageHeader] = GrpcProtocol.EncodeMessage($"Content-Type '{request.ContentType}' is not supported.");
            return;
        }

        response.StatusCode = StatusCodes.Status200OK;
        response.ContentType = GrpcProtocol.ContentType;

        if (!HttpProtocol.IsHttp2(request.Protocol))
        {
            // Trailers (grpc-status) need HTTP/2.
            WriteStatus(http, GrpcStatusCode.Internal, $"Request protocol '{request.Protocol}' is not supported.", trailers: null);
            return;
        }

        // An unparsable grpc-timeout is ignored (no deadline), as grpc-dotnet does.
        TimeSpan? timeout = GrpcProtocol.TryParseTimeout(request.Headers[GrpcProtocol.TimeoutHeader], out var t) ? t : null;
        using var call = new GrpcServerCallContext(http, timeout);

        GrpcStatusCode status;
        string message;
        try
        {
            await body(call);
            status = GrpcStatusCode.OK;
            message = string.Empty;
        }
        catch (GrpcStatusException ex)
        {
            status = ex.Status;
            message = ex.Message;
        }
        catch (Exception ex) when (ex is OperationCanceledException or IOException && call.DeadlineExceeded)
        {
            status = GrpcStatusCode.DeadlineExceeded;
            message = "Deadline Exceeded";
        }
        catch (Exception ex) when (ex is OperationCanceledException or IOException && call.ClientCancelled)
        {
            // The client reset the stream: there is nobody to send a status to.
            return;
        }
        catch (Exception)
        {
            // Handler details never leak to the client (same policy as grpc-dotnet's default).
            status = GrpcStatusCode.Unknown;
            message = "Exception was thrown by handler.";
        }

        if (call.ClientCancelled)
        {
            return;
        }

        WriteStatus(http, status, message, call.ResponseTrailers);
    }

    /// <summary>
    /// Status in trailers after messages, or a Trailers-Only response (status in the one HEADERS frame,
    /// END_STREAM) when nothing was sent yet.
    /// </summary>
    private static void WriteStatus(HttpContext http, GrpcStatusCode status, string message, Dictionary<string, string>? trailers)
    {
        var response = http.Response;
        var code = ((int)status).ToString();
        if (!response.HasStarted)
        {
            response.Headers[GrpcProtocol.StatusHeader] = code;
            if (message.Length > 0)
            {
                response.Headers[GrpcProtocol.MessageHeader] = GrpcProtocol.EncodeMessage(message);
            }

            foreach (var (name, value) in trailers ?? [])
            {
                response.Headers[name] = value;
            }

            return;
        }

        response.AppendTrailer(GrpcProtocol.StatusHeader, code);
        if (message.Length > 0)
        {
            response.AppendTrailer(GrpcProtocol.MessageHeader, GrpcProtocol.EncodeMessage(message));
        }

        foreach (var (name, value) in trailers ?? [])
        {
            response.AppendTrailer(name, value);
        }
    }
}
