using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using Google.Protobuf;

namespace Proxy.Load.Server.HandMadeGrpc;

/// <summary>Reads and writes Length-Prefixed-Messages over a request or response body pipe.</summary>
public static class GrpcMessageFraming
{
    /// <summary>Same default as grpc-dotnet and grpc-js: 4 MiB per received message.</summary>
    public const int MaxReceiveMessageSize = 4 * 1024 * 1024;

    /// <summary>
    /// Reads the next message, or returns null at a clean end of the body (between messages).
    /// </summary>
    public static async ValueTask<T?> ReadMessageAsync<T>(PipeReader reader, MessageParser<T> parser, CancellationToken cancellationToken)
        where T : class, IMessage<T>
    {
        while (true)
        {
            var result = await reader.ReadAsync(cancellationToken);
            var buffer = result.Buffer;
            if (TryParseMessage(ref buffer, parser, out var message))
            {
                reader.AdvanceTo(buffer.Start);
                return message;
            }

            if (result.IsCompleted || result.IsCanceled)
            {
                var leftover = buffer.Length;
                reader.AdvanceTo(buffer.End);
                if (leftover == 0)
                {
                    return null;
                }

                throw new GrpcStatusException(GrpcStatusCode.Internal, $"Incomplete message: the request body ended {leftover} bytes into a message.");
            }

            // Nothing consumed; everything examined: wait for more bytes.
            reader.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    private static bool TryParseMessage<T>(ref ReadOnlySequence<byte> buffer, MessageParser<T> parser, out T? message)
        where T : class, IMessage<T>
    {
        message = null;
        if (buffer.Length < GrpcProtocol.MessageHeaderSize)
        {
            return false;
        }

        Span<byte> header = stackalloc byte[GrpcProtocol.MessageHeaderSize];
        buffer.Slice(0, GrpcProtocol.MessageHeaderSize).CopyTo(header);
        if (header[0] != 0)
        {
            // We advertise no grpc-accept-encoding, so a compressed message is a client bug.
            throw new GrpcStatusException(GrpcStatusCode.Unimplemented, "Compressed messages are not supported by this server.");
        }

        var length = BinaryPrimitives.ReadUInt32BigEndian(header[1..]);
        if (length > MaxReceiveMessageSize)
        {
            throw new GrpcStatusException(GrpcStatusCode.ResourceExhausted,
                $"Received message larger than max ({length} vs. {MaxReceiveMessageSize})");
        }

        if (buffer.Length < GrpcProtocol.MessageHeaderSize + length)
        {
            return false;
        }

        var payload = buffer.Slice(GrpcProtocol.MessageHeaderSize, length);
        message = parser.ParseFrom(payload);
        buffer = buffer.Slice(payload.End);
        return true;
    }

    /// <summary>Writes one message and flushes it, so each message leaves as soon as it is produced.</summary>
    public static async ValueTask WriteMessageAsync(PipeWriter writer, IMessage message, CancellationToken cancellationToken)
    {
        var size = message.CalculateSize();
        var span = writer.GetSpan(GrpcProtocol.MessageHeaderSize + size);
        span[0] = 0;
        BinaryPrimitives.WriteUInt32BigEndian(span[1..], (uint)size);
        message.WriteTo(span.Slice(GrpcProtocol.MessageHeaderSize, size));
        writer.Advance(GrpcProtocol.MessageHeaderSize + size);
        var result = await writer.FlushAsync(cancellationToken);
        if (result.IsCompleted || result.IsCanceled)
        {
            // The client is gone (stream reset or connection closed): end the call instead of writing
            // into a sink that drops everything.
            throw new OperationCanceledException("The client is no longer reading this call.");
        }
    }

    /// <summary>Frames one message into a byte array (for raw clients in tests).</summary>
    public static byte[] Frame(IMessage message)
    {
        var size = message.CalculateSize();
        var bytes = new byte[GrpcProtocol.MessageHeaderSize + size];
        BinaryPrimitives.WriteUInt32BigEndian(bytes.AsSpan(1), (uint)size);
        message.WriteTo(bytes.AsSpan(GrpcProtocol.MessageHeaderSize));
        return bytes;
    }
}
