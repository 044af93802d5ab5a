namespace Proxy.Codecs.Http2;

// Parsers of the frames that belong to one stream: DATA, HEADERS, PRIORITY, RST_STREAM,
// PUSH_PROMISE and CONTINUATION (RFC 9113 §6.1-§6.4, §6.6, §6.10). Layout diagrams are on the
// parsed record structs in Http2Frames.cs.
public static partial class Http2FrameReader
{
    /// <summary>
    /// Parses DATA (RFC 9113 §6.1). <see cref="DataFrame.Data"/> excludes padding;
    /// <see cref="DataFrame.FlowControlledLength"/> is the whole payload, since "the entire DATA frame
    /// payload is included in flow control, including the Pad Length and Padding fields".
    /// </summary>
    public static DataFrame ReadData(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.1: "If a DATA frame is received whose Stream Identifier field is 0x00, the recipient
        // MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "data_stream_zero");
        ReadOnlySequence<byte> data = StripPadding(header, payload, fixedFields: 0, "data");
        return new DataFrame(data, header.HasFlag(Http2FrameFlags.EndStream), (int)payload.Length);
    }

    /// <summary>
    /// Parses HEADERS (RFC 9113 §6.2), stripping padding and the deprecated priority fields.
    /// </summary>
    /// <remarks>
    /// NOTE: a HEADERS frame whose priority names its own stream is a stream error of type PROTOCOL_ERROR
    /// (RFC 9113 §5.3.1), but it is NOT thrown here: the field block must still be decoded so the HPACK
    /// dynamic table stays in step with the peer (RFC 9113 §4.3). The engine checks
    /// <see cref="DependsOnItself"/> once the block is decoded and then resets the stream. (PRIORITY has no field block, so <see cref="ReadPriority"/> throws.)
    /// </remarks>
    public static HeadersFrame ReadHeaders(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.2: "If a HEADERS frame is received whose Stream Identifier field is 0x00, the recipient
        // MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "headers_stream_zero");

        bool hasPriority = header.HasFlag(Http2FrameFlags.Priority);
        ReadOnlySequence<byte> fragment = StripPadding(header, payload, fixedFields: hasPriority ? 5 : 0, "headers");

        int streamDependency = 0;
        bool exclusive = false;
        byte weight = 0;
        if (hasPriority)
        {
            int priorityOffset = header.HasFlag(Http2FrameFlags.Padded) ? 1 : 0;
            uint dependency = ReadUInt32(payload, priorityOffset);
            exclusive = (dependency & 0x8000_0000u) != 0;
            streamDependency = (int)(dependency & 0x7FFF_FFFFu);
            weight = ReadByte(payload, priorityOffset + 4);
        }

        return new HeadersFrame(
            fragment,
            header.HasFlag(Http2FrameFlags.EndStream),
            header.HasFlag(Http2FrameFlags.EndHeaders),
            hasPriority,
            streamDependency,
            exclusive,
            weight);
    }

    /// <summary>
    /// True when a HEADERS frame's priority makes its stream depend on itself, a stream error of type
    /// PROTOCOL_ERROR (RFC 9113 §5.3.1) that the engine raises after decoding the field block (see <see cref="ReadHeaders"/>).
    /// </summary>
    public static bool DependsOnItself(in Http2FrameHeader header, in HeadersFrame frame)
        => frame.HasPriority && frame.StreamDependency == header.StreamId;

    /// <summary>
    /// Parses PRIORITY (RFC 9113 §6.3). Throws a stream error when the length is not 5 or the stream
    /// depends on itself; the engine otherwise ignores the frame (RFC 9113 §5.3.2).
    /// </summary>
    public static PriorityFrame ReadPriority(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.3: "If a PRIORITY frame is received with a stream identifier of 0x00, the recipient
        // MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "priority_stream_zero");

        // RFC 9113 §6.3: "A PRIORITY frame with a length other than 5 octets MUST be treated as a stream
        // error (Section 5.4.2) of type FRAME_SIZE_ERROR."
        if (payload.Length != 5)
        {
            throw new Http2StreamException(
                header.StreamId,
                $"PRIORITY frame of {payload.Length} octets; it must be 5.",
                Http2ErrorCode.FrameSizeError,
                "priority_length");
        }

        uint dependency = ReadUInt32(payload, 0);
        var frame = new PriorityFrame(
            (int)(dependency & 0x7FFF_FFFFu),
            (dependency & 0x8000_0000u) != 0,
            ReadByte(payload, 4));

        // RFC 9113 §5.3.1: "A stream cannot depend on itself. An endpoint MUST treat this as a stream error
        // (Section 5.4.2) of type PROTOCOL_ERROR."
        if (frame.StreamDependency == header.StreamId)
        {
            throw new Http2StreamException(
                header.StreamId,
                $"PRIORITY frame makes stream {header.StreamId} depend on itself.",
                Http2ErrorCode.ProtocolError,
                "priority_self_dependency");
        }

        return frame;
    }

    /// <summary>Parses RST_STREAM (RFC 9113 §6.4). Unknown error codes are returned as they are (RFC 9113 §7).</summary>
    public static RstStreamFrame ReadRstStream(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.4: "If a RST_STREAM frame is received with a stream identifier of 0x00, the recipient
        // MUST treat this as a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "rst_stream_stream_zero");

        // RFC 9113 §6.4: "A RST_STREAM frame with a length other than 4 octets MUST be treated as a connection
        // error (Section 5.4.1) of type FRAME_SIZE_ERROR."
        if (payload.Length != 4)
        {
            throw ConnectionFrameSizeError(header, "RST_STREAM must be 4 octets", "rst_stream_length");
        }

        return new RstStreamFrame((Http2ErrorCode)ReadUInt32(payload, 0));
    }

    /// <summary>
    /// Parses PUSH_PROMISE (RFC 9113 §6.6). A server must reject every PUSH_PROMISE (RFC 9113 §8.4); that is the
    /// engine's decision, this parser exists for the client side and the scripted test peer.
    /// </summary>
    public static PushPromiseFrame ReadPushPromise(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.6: "If the Stream Identifier field specifies the value 0x00, a recipient MUST respond
        // with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "push_promise_stream_zero");

        ReadOnlySequence<byte> fragment = StripPadding(header, payload, fixedFields: 4, "push_promise");
        int promisedOffset = header.HasFlag(Http2FrameFlags.Padded) ? 1 : 0;
        // RFC 9113 §6.6: the Reserved bit before Promised Stream ID is ignored on receipt (§4.1).
        int promisedStreamId = (int)(ReadUInt32(payload, promisedOffset) & 0x7FFF_FFFFu);
        return new PushPromiseFrame(promisedStreamId, fragment, header.HasFlag(Http2FrameFlags.EndHeaders));
    }

    /// <summary>Parses CONTINUATION (RFC 9113 §6.10). Whether one is expected here is the engine's rule.</summary>
    public static ContinuationFrame ReadContinuation(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.10: "If a CONTINUATION frame is received with a Stream Identifier field of 0x00, the
        // recipient MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireNonZeroStream(header, "continuation_stream_zero");
        return new ContinuationFrame(payload, header.HasFlag(Http2FrameFlags.EndHeaders));
    }
}
