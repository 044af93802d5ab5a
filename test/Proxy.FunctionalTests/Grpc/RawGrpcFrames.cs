using System.Buffers.Binary;
using Google.Protobuf;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>
/// gRPC's Length-Prefixed-Message framing (grpc/grpc doc/PROTOCOL-HTTP2.md) by hand, for the few tests that must
/// see or send what a real gRPC client hides or refuses to send: truncated messages, a wrong content-type, the
/// exact split between headers and trailers, a backend that breaks a call halfway. Everything else uses
/// Grpc.Net.Client or grpc-js.
/// </summary>
public static class RawGrpcFrames
{
    public const string ContentType = "application/grpc";
    public const string StatusHeader = "grpc-status";
    public const string MessageHeader = "grpc-message";
    public const string TimeoutHeader = "grpc-timeout";

    /// <summary>Compressed-Flag (1 byte) + Message-Length (4 bytes, big endian).</summary>
    public const int MessageHeaderSize = 5;

    /// <summary>One uncompressed message with its 5-byte prefix.</summary>
    public static byte[] Frame(IMessage message)
    {
        var size = message.CalculateSize();
        var bytes = new byte[MessageHeaderSize + size];
        BinaryPrimitives.WriteUInt32BigEndian(bytes.AsSpan(1), (uint)size);
        message.WriteTo(bytes.AsSpan(MessageHeaderSize));
        return bytes;
    }

    /// <summary>Every message of a response body; fails the test on a compressed or truncated one.</summary>
    public static List<T> Parse<T>(byte[] body, MessageParser<T> parser) where T : IMessage<T>
    {
        var messages = new List<T>();
        for (var offset = 0; offset < body.Length;)
        {
            Assert.True(body.Length - offset >= MessageHeaderSize, $"{body.Length - offset} bytes left, less than a message prefix");
            Assert.Equal(0, body[offset]); // not compressed
            var length = BinaryPrimitives.ReadInt32BigEndian(body.AsSpan(offset + 1));
            Assert.True(body.Length - offset - MessageHeaderSize >= length, $"a {length}-byte message truncated at {body.Length - offset - MessageHeaderSize}");
            messages.Add(parser.ParseFrom(body, offset + MessageHeaderSize, length));
            offset += MessageHeaderSize + length;
        }

        return messages;
    }
}
