using System.Buffers.Binary;

namespace Proxy.Codecs.Http2;

// Writers of the frames that belong to one stream: DATA, HEADERS, CONTINUATION, PRIORITY, RST_STREAM and
// PUSH_PROMISE (RFC 9113 §6.1-§6.4, §6.6, §6.10). None of them pads: padding is a privacy tool
// (RFC 9113 §10.7) the server does not use; WriteFrame can send a padded frame when a test needs one.
public static partial class Http2FrameWriter
{
    /// <summary>Writes DATA (RFC 9113 §6.1) carrying <paramref name="data"/>, unpadded.</summary>
    public static void WriteData(IBufferWriter<byte> output, int streamId, ReadOnlySequence<byte> data, bool endStream)
    {
        CheckId(streamId, nameof(streamId));
        CheckPayloadLength(data.Length, nameof(data));
        WriteHeader(output, (int)data.Length, Http2FrameType.Data, endStream ? Http2FrameFlags.EndStream : Http2FrameFlags.None, streamId);
        CopyPayload(output, data);
    }

    /// <summary>Writes DATA (RFC 9113 §6.1) carrying <paramref name="data"/>, unpadded.</summary>
    public static void WriteData(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> data, bool endStream)
    {
        CheckId(streamId, nameof(streamId));
        WriteHeader(output, data.Length, Http2FrameType.Data, endStream ? Http2FrameFlags.EndStream : Http2FrameFlags.None, streamId);
        CopyPayload(output, data);
    }

    /// <summary>Writes HEADERS (RFC 9113 §6.2) without padding or priority fields.</summary>
    public static void WriteHeaders(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> headerBlockFragment, bool endStream, bool endHeaders)
    {
        CheckId(streamId, nameof(streamId));
        var flags = (endStream ? Http2FrameFlags.EndStream : Http2FrameFlags.None)
            | (endHeaders ? Http2FrameFlags.EndHeaders : Http2FrameFlags.None);
        WriteHeader(output, headerBlockFragment.Length, Http2FrameType.Headers, flags, streamId);
        CopyPayload(output, headerBlockFragment);
    }

    /// <summary>Writes CONTINUATION (RFC 9113 §6.10).</summary>
    public static void WriteContinuation(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> headerBlockFragment, bool endHeaders)
    {
        CheckId(streamId, nameof(streamId));
        WriteHeader(output, headerBlockFragment.Length, Http2FrameType.Continuation, endHeaders ? Http2FrameFlags.EndHeaders : Http2FrameFlags.None, streamId);
        CopyPayload(output, headerBlockFragment);
    }

    /// <summary>
    /// Writes PRIORITY (RFC 9113 §6.3). <paramref name="weight"/> is the wire value: the weight minus one.
    /// </summary>
    public static void WritePriority(IBufferWriter<byte> output, int streamId, int streamDependency, bool exclusive, byte weight)
    {
        CheckId(streamId, nameof(streamId));
        CheckId(streamDependency, nameof(streamDependency));
        Span<byte> payload = BeginFixedFrame(output, 5, Http2FrameType.Priority, Http2FrameFlags.None, streamId);
        BinaryPrimitives.WriteUInt32BigEndian(payload, (uint)streamDependency | (exclusive ? 0x8000_0000u : 0u));
        payload[4] = weight;
        output.Advance(Http2FrameHeader.Size + 5);
    }

    /// <summary>Writes RST_STREAM (RFC 9113 §6.4).</summary>
    public static void WriteRstStream(IBufferWriter<byte> output, int streamId, Http2ErrorCode errorCode)
    {
        CheckId(streamId, nameof(streamId));
        Span<byte> payload = BeginFixedFrame(output, 4, Http2FrameType.RstStream, Http2FrameFlags.None, streamId);
        BinaryPrimitives.WriteUInt32BigEndian(payload, (uint)errorCode);
        output.Advance(Http2FrameHeader.Size + 4);
    }

    /// <summary>Writes PUSH_PROMISE (RFC 9113 §6.6) without padding. A server built on this library never pushes.</summary>
    public static void WritePushPromise(IBufferWriter<byte> output, int streamId, int promisedStreamId, ReadOnlySpan<byte> headerBlockFragment, bool endHeaders)
    {
        CheckId(streamId, nameof(streamId));
        CheckId(promisedStreamId, nameof(promisedStreamId));
        CheckPayloadLength(4L + headerBlockFragment.Length, nameof(headerBlockFragment));
        WriteHeader(output, 4 + headerBlockFragment.Length, Http2FrameType.PushPromise, endHeaders ? Http2FrameFlags.EndHeaders : Http2FrameFlags.None, streamId);
        BinaryPrimitives.WriteUInt32BigEndian(output.GetSpan(4), (uint)promisedStreamId);
        output.Advance(4);
        CopyPayload(output, headerBlockFragment);
    }
}
