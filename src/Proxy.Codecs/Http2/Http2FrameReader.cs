using System.Buffers.Binary;
using System.Runtime.CompilerServices;

namespace Proxy.Codecs.Http2;

/// <summary>
/// Allocation-free frame parsing over <see cref="ReadOnlySequence{T}"/>. Stateless: the caller
/// (the connection read loop) owns the buffer and the settings it passes in.
/// </summary>
/// <remarks>
/// Each <c>Read*</c> method enforces the RFC 9113 §6 rules that the frame alone decides (stream id
/// zero or not, lengths, padding, SETTINGS value ranges) and throws
/// <see cref="Http2ConnectionException"/> or <see cref="Http2StreamException"/> with the RFC error code.
/// Rules that need connection state (stream states, header-block sequencing, flow-control windows,
/// a zero WINDOW_UPDATE increment whose error kind depends on the stream) belong to the engine.
/// Reserved bits (the top bit of every 31-bit stream id or increment) are ignored on read,
/// as RFC 9113 §4.1 requires ("MUST remain unset (0x0) when sending and MUST be ignored when receiving").
/// The per-frame parsers live in Http2FrameReader.Stream.cs and Http2FrameReader.Connection.cs.
/// </remarks>
public static partial class Http2FrameReader
{
    /// <summary>The client connection preface, RFC 9113 §3.4.</summary>
    public static ReadOnlySpan<byte> ClientPreface => "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8;

    /// <summary>The largest frame payload the 24-bit length field can carry (2^24-1), RFC 9113 §4.1.</summary>
    public const int MaxFramePayloadLength = (1 << 24) - 1;

    /// <summary>The initial and minimum SETTINGS_MAX_FRAME_SIZE (2^14), RFC 9113 §4.2.</summary>
    public const int DefaultMaxFrameSize = 1 << 14;

    /// <summary>
    /// Reads one whole frame from the front of <paramref name="buffer"/> and slices it off.
    /// Returns false when more bytes are needed, leaving <paramref name="buffer"/> untouched.
    /// Throws a FRAME_SIZE_ERROR connection error when the length exceeds <paramref name="maxFrameSize"/>
    /// (RFC 9113 §4.2).
    /// </summary>
    /// <remarks>
    /// Frames of unknown type are returned like any other: RFC 9113 §4.1 and §5.5 say
    /// "Implementations MUST ignore and discard frames of unknown types", which is the engine's call.
    /// NOTE: RFC 9113 §4.2 makes an oversized frame a connection error when it could alter connection
    /// state, and lets an endpoint treat any stream error as a connection error (§5.4); we do so for
    /// every oversized frame, because the frame cannot be parsed and skipping it would mean buffering
    /// a payload larger than we promised to accept.
    /// </remarks>
    public static bool TryReadFrame(ref ReadOnlySequence<byte> buffer, int maxFrameSize, out Http2FrameHeader header, out ReadOnlySequence<byte> payload)
    {
        if (!TryReadFrameHeader(buffer, out header))
        {
            payload = default;
            return false;
        }

        if (header.Length > maxFrameSize)
        {
            throw new Http2ConnectionException(
                $"{header.Type} frame of {header.Length} octets exceeds the maximum frame size {maxFrameSize} (RFC 9113 §4.2).",
                Http2ErrorCode.FrameSizeError,
                "frame_too_large");
        }

        long frameLength = Http2FrameHeader.Size + (long)header.Length;
        if (buffer.Length < frameLength)
        {
            header = default;
            payload = default;
            return false;
        }

        payload = buffer.Slice(Http2FrameHeader.Size, header.Length);
        buffer = buffer.Slice(frameLength);
        return true;
    }

    /// <summary>
    /// Parses the 9-octet frame header at the front of <paramref name="buffer"/> without consuming it
    /// and without checking the length against any limit. Returns false when fewer than 9 octets are buffered.
    /// </summary>
    public static bool TryReadFrameHeader(in ReadOnlySequence<byte> buffer, out Http2FrameHeader header)
    {
        if (buffer.Length < Http2FrameHeader.Size)
        {
            header = default;
            return false;
        }

        ReadOnlySpan<byte> first = buffer.FirstSpan;
        if (first.Length >= Http2FrameHeader.Size)
        {
            header = ParseFrameHeader(first);
        }
        else
        {
            Span<byte> copy = stackalloc byte[Http2FrameHeader.Size];
            buffer.Slice(0, Http2FrameHeader.Size).CopyTo(copy);
            header = ParseFrameHeader(copy);
        }

        return true;
    }

    private static Http2FrameHeader ParseFrameHeader(ReadOnlySpan<byte> source)
    {
        int length = (source[0] << 16) | (source[1] << 8) | source[2];
        var type = (Http2FrameType)source[3];
        var flags = (Http2FrameFlags)source[4];
        // RFC 9113 §4.1: the reserved bit "MUST be ignored when receiving".
        int streamId = (int)(BinaryPrimitives.ReadUInt32BigEndian(source.Slice(5)) & 0x7FFF_FFFFu);
        return new Http2FrameHeader(length, type, flags, streamId);
    }

    // ---- shared helpers for the per-frame parsers ----

    /// <summary>RFC 9113 §6.1, 6.2, 6.3, 6.4, 6.6, 6.10: these frames "MUST be associated with a stream".</summary>
    private static void RequireNonZeroStream(in Http2FrameHeader header, string token)
    {
        if (header.StreamId == 0)
        {
            throw new Http2ConnectionException(
                $"{header.Type} frame received on stream 0.",
                Http2ErrorCode.ProtocolError,
                token);
        }
    }

    /// <summary>RFC 9113 §6.5, 6.7, 6.8: these frames apply to the connection and "MUST" use stream 0.</summary>
    private static void RequireZeroStream(in Http2FrameHeader header, string token)
    {
        if (header.StreamId != 0)
        {
            throw new Http2ConnectionException(
                $"{header.Type} frame received on stream {header.StreamId}; it must use stream 0.",
                Http2ErrorCode.ProtocolError,
                token);
        }
    }

    private static Http2ConnectionException ConnectionFrameSizeError(in Http2FrameHeader header, string expectation, string token)
        => new($"{header.Type} frame of {header.Length} octets: {expectation}.", Http2ErrorCode.FrameSizeError, token);

    /// <summary>
    /// Strips the Pad Length field and the padding of a PADDED frame (RFC 9113 §6.1, §6.2, §6.6) and returns
    /// the content between them; <paramref name="fixedFields"/> counts the octets after Pad Length that the
    /// frame needs before its content (5 for HEADERS priority, 4 for PUSH_PROMISE's promised stream id).
    /// </summary>
    private static ReadOnlySequence<byte> StripPadding(in Http2FrameHeader header, in ReadOnlySequence<byte> payload, int fixedFields, string tokenPrefix)
    {
        bool padded = header.HasFlag(Http2FrameFlags.Padded);
        int required = (padded ? 1 : 0) + fixedFields;
        if (payload.Length < required)
        {
            // RFC 9113 §4.2: a frame "too small to contain mandatory frame data" is a FRAME_SIZE_ERROR; every frame
            // that gets here (DATA, HEADERS, PUSH_PROMISE) alters connection state (flow control or the HPACK
            // context), so it is a connection error.
            throw ConnectionFrameSizeError(header, $"too short for its {required} octets of mandatory fields", tokenPrefix + "_too_short");
        }

        if (!padded)
        {
            return payload.Slice(fixedFields);
        }

        int padLength = ReadByte(payload, 0);
        // RFC 9113 §6.1 / §6.2 / §6.6: "If the length of the padding is the length of the frame payload or greater,
        // the recipient MUST treat this as a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        // NOTE: for HEADERS with PRIORITY and for PUSH_PROMISE the padding must also leave room for the fixed
        // fields; padding that overlaps them is the same fault, so it gets the same error.
        if (padLength > payload.Length - required)
        {
            throw new Http2ConnectionException(
                $"{header.Type} frame pads {padLength} octets but its payload is {payload.Length} octets.",
                Http2ErrorCode.ProtocolError,
                tokenPrefix + "_padding_too_long");
        }

        return payload.Slice(required, payload.Length - required - padLength);
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static byte ReadByte(in ReadOnlySequence<byte> source, int offset)
    {
        ReadOnlySpan<byte> first = source.FirstSpan;
        if (first.Length > offset)
        {
            return first[offset];
        }

        Span<byte> copy = stackalloc byte[1];
        source.Slice(offset, 1).CopyTo(copy);
        return copy[0];
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static uint ReadUInt32(in ReadOnlySequence<byte> source, int offset)
    {
        ReadOnlySpan<byte> first = source.FirstSpan;
        if (first.Length >= offset + 4)
        {
            return BinaryPrimitives.ReadUInt32BigEndian(first.Slice(offset));
        }

        Span<byte> copy = stackalloc byte[4];
        source.Slice(offset, 4).CopyTo(copy);
        return BinaryPrimitives.ReadUInt32BigEndian(copy);
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static ulong ReadUInt64(in ReadOnlySequence<byte> source, int offset)
    {
        ReadOnlySpan<byte> first = source.FirstSpan;
        if (first.Length >= offset + 8)
        {
            return BinaryPrimitives.ReadUInt64BigEndian(first.Slice(offset));
        }

        Span<byte> copy = stackalloc byte[8];
        source.Slice(offset, 8).CopyTo(copy);
        return BinaryPrimitives.ReadUInt64BigEndian(copy);
    }
}
