using Proxy.Protocols;

namespace Proxy.Benchmarks.Http2;

/// <summary>
/// The app side of a gRPC unary call, written against the engine seam (no ASP.NET): read the request
/// message to its end, answer with headers, one small length-prefixed message and grpc-status trailers.
/// </summary>
// Stateless: one instance serves every stream, on thread-pool threads.
internal sealed class GrpcUnaryHandler : IHttpRequestHandler
{
    /// <summary>A gRPC message: 1 octet compressed flag, 4 octets length, then 16 octets of protobuf.</summary>
    public static readonly byte[] Message = CreateMessage(16);

    public async Task HandleAsync(HttpExchange exchange)
    {
        var body = exchange.RequestBody;
        while (true)
        {
            var result = await body.ReadAsync();
            bool done = result.IsCompleted;
            body.AdvanceTo(result.Buffer.End);
            if (done)
            {
                break;
            }
        }

        // The response fields of GrpcHeaders.Response (the engine adds :status).
        exchange.ResponseHeaders.Add("content-type", "application/grpc");
        exchange.ResponseHeaders.Add("date", "Tue, 15 Apr 2025 09:30:00 GMT");
        exchange.ResponseHeaders.Add("server", "Proxy");
        exchange.ResponseHeaders.Add("grpc-encoding", "identity");
        exchange.ResponseBody.Write(Message);
        await exchange.ResponseBody.FlushAsync();
        exchange.ResponseTrailers.Add("grpc-status", "0");
        exchange.ResponseTrailers.Add("grpc-message", "OK");
        // Returning completes the response: the engine sends the trailers with END_STREAM.
    }

    private static byte[] CreateMessage(int payloadLength)
    {
        var message = new byte[5 + payloadLength];
        System.Buffers.Binary.BinaryPrimitives.WriteInt32BigEndian(message.AsSpan(1), payloadLength);
        for (int i = 5; i < message.Length; i++)
        {
            message[i] = (byte)i;
        }
        return message;
    }
}
