using System.Buffers.Binary;

namespace Proxy.Codecs.Http2;

/// <summary>
/// Writes whole frames into an <see cref="IBufferWriter{T}"/>. Stateless; splitting DATA by
/// windows and max frame size is the caller's job (the frame-writer loop).
/// </summary>
/// <remarks>
/// Writers check only what the wire format can carry (a payload of at most 2^24-1 octets, 31-bit
/// identifiers), not the §6 rules a receiver enforces, so the scripted test peer can send broken frames
/// on purpose. Reserved bits are always written as zero (RFC 9113 §4.1: "MUST remain unset (0x0) when
/// sending"). The per-frame writers live in Http2FrameWriter.Stream.cs and Http2FrameWriter.Connection.cs.
/// </remarks>
public static partial class Http2FrameWriter
{
    // The largest span asked of the output at once when copying a payload; a PipeWriter hands out
    // pool-sized segments, so asking for a whole 16 MiB frame would force an unpooled buffer.
    private const int CopyChunkHint = 16 * 1024;

    /// <summary>Writes only a 9-octet frame header (for callers that write the payload themselves).</summary>
    public static void WriteFrameHeader(Span<byte> destination, in Http2FrameHeader header)
    {
        if ((uint)header.Length > Http2FrameReader.MaxFramePayloadLength)
        {
            throw new ArgumentOutOfRangeException(nameof(header), header.Length, "A frame payload is at most 2^24-1 octets (RFC 9113 §4.1).");
        }

        if (destination.Length < Http2FrameHeader.Size)
        {
            throw new ArgumentException("The destination is shorter than a frame header.", nameof(destination));
        }

        destination[0] = (byte)(header.Length >> 16);
        destination[1] = (byte)(header.Length >> 8);
        destination[2] = (byte)header.Length;
        destination[3] = (byte)header.Type;
        destination[4] = (byte)header.Flags;
        // RFC 9113 §4.1: the reserved bit "MUST remain unset (0x0) when sending".
        BinaryPrimitives.WriteUInt32BigEndian(destination.Slice(5), (uint)header.StreamId & 0x7FFF_FFFFu);
    }

    /// <summary>
    /// Writes a frame of any type, flags and payload, unchecked beyond the wire format. For extension and unknown
    /// frame types, and for test peers that need frames the typed writers will not produce (padding, priority).
    /// </summary>
    public static void WriteFrame(IBufferWriter<byte> output, Http2FrameType type, Http2FrameFlags flags, int streamId, ReadOnlySpan<byte> payload)
    {
        WriteHeader(output, payload.Length, type, flags, streamId);
        CopyPayload(output, payload);
    }

    /// <summary>Writes a frame header straight into <paramref name="output"/>.</summary>
    private static void WriteHeader(IBufferWriter<byte> output, int length, Http2FrameType type, Http2FrameFlags flags, int streamId)
    {
        Span<byte> span = output.GetSpan(Http2FrameHeader.Size);
        WriteFrameHeader(span, new Http2FrameHeader(length, type, flags, streamId));
        output.Advance(Http2FrameHeader.Size);
    }

    /// <summary>
    /// Reserves header plus a small fixed payload in one span, writes the header, and returns the payload part;
    /// the caller fills it and calls <c>output.Advance(Http2FrameHeader.Size + payloadLength)</c>.
    /// </summary>
    private static Span<byte> BeginFixedFrame(IBufferWriter<byte> output, int payloadLength, Http2FrameType type, Http2FrameFlags flags, int streamId)
    {
        Span<byte> span = output.GetSpan(Http2FrameHeader.Size + payloadLength);
        WriteFrameHeader(span, new Http2FrameHeader(payloadLength, type, flags, streamId));
        return span.Slice(Http2FrameHeader.Size, payloadLength);
    }

    private static void CopyPayload(IBufferWriter<byte> output, ReadOnlySpan<byte> payload)
    {
        while (!payload.IsEmpty)
        {
            Span<byte> span = output.GetSpan(Math.Min(payload.Length, CopyChunkHint));
            int count = Math.Min(span.Length, payload.Length);
            payload.Slice(0, count).CopyTo(span);
            output.Advance(count);
            payload = payload.Slice(count);
        }
    }

    private static void CopyPayload(IBufferWriter<byte> output, in ReadOnlySequence<byte> payload)
    {
        foreach (ReadOnlyMemory<byte> segment in payload)
        {
            CopyPayload(output, segment.Span);
        }
    }

    /// <summary>A stream id or other 31-bit field must fit in 31 bits; a negative value is a caller bug.</summary>
    private static void CheckId(int value, string name)
    {
        if (value < 0)
        {
            throw new ArgumentOutOfRangeException(name, value, "Stream identifiers and increments are 31-bit values (RFC 9113 §4.1).");
        }
    }

    private static void CheckPayloadLength(long length, string name)
    {
        if (length > Http2FrameReader.MaxFramePayloadLength)
        {
            throw new ArgumentOutOfRangeException(name, length, "A frame payload is at most 2^24-1 octets (RFC 9113 §4.1).");
        }
    }
}
