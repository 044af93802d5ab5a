using System.Buffers.Binary;

namespace Proxy.Codecs.Http2;

// Parsers of the frames that (also) act on the connection: SETTINGS, PING, GOAWAY and WINDOW_UPDATE
// (RFC 9113 §6.5, §6.7-§6.9). Layout diagrams are on the parsed record structs in Http2Frames.cs.
public static partial class Http2FrameReader
{
    /// <summary>The size of one SETTINGS parameter on the wire (RFC 9113 §6.5.1).</summary>
    public const int SettingSize = 6;

    /// <summary>The largest legal SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATE increment, 2^31-1 (RFC 9113 §6.9.1).</summary>
    public const int MaxWindowSize = int.MaxValue;

    /// <summary>
    /// Validates a SETTINGS frame (length multiple of 6, stream 0, ACK with empty payload) and
    /// returns its parameter count; read each with <see cref="ReadSetting"/>.
    /// Value-range rules (ENABLE_PUSH 0/1, INITIAL_WINDOW_SIZE ≤ 2^31-1, MAX_FRAME_SIZE range) are enforced here too.
    /// </summary>
    public static int ReadSettings(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.5: "If an endpoint receives a SETTINGS frame whose Stream Identifier field is anything other
        // than 0x00, the endpoint MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireZeroStream(header, "settings_stream_nonzero");

        if (header.HasFlag(Http2FrameFlags.Ack))
        {
            // RFC 9113 §6.5: "Receipt of a SETTINGS frame with the ACK flag set and a length field value other
            // than 0 MUST be treated as a connection error (Section 5.4.1) of type FRAME_SIZE_ERROR."
            if (payload.Length != 0)
            {
                throw ConnectionFrameSizeError(header, "a SETTINGS ACK must be empty", "settings_ack_with_payload");
            }

            return 0;
        }

        // RFC 9113 §6.5: "A SETTINGS frame with a length other than a multiple of 6 octets MUST be treated as a
        // connection error (Section 5.4.1) of type FRAME_SIZE_ERROR."
        if (payload.Length % SettingSize != 0)
        {
            throw ConnectionFrameSizeError(header, "SETTINGS length must be a multiple of 6", "settings_length");
        }

        int count = (int)(payload.Length / SettingSize);
        for (int i = 0; i < count; i++)
        {
            ValidateSetting(ReadSetting(payload, i));
        }

        return count;
    }

    /// <summary>
    /// Reads parameter <paramref name="index"/> of a SETTINGS payload already checked by <see cref="ReadSettings"/>.
    /// Unknown identifiers are returned as they are; RFC 9113 §6.5.2 says they "MUST" be ignored, by the engine.
    /// </summary>
    public static Http2Setting ReadSetting(in ReadOnlySequence<byte> payload, int index)
    {
        int offset = index * SettingSize;
        ReadOnlySpan<byte> first = payload.FirstSpan;
        Span<byte> copy = stackalloc byte[SettingSize];
        scoped ReadOnlySpan<byte> source;
        if (first.Length >= offset + SettingSize)
        {
            source = first.Slice(offset, SettingSize);
        }
        else
        {
            payload.Slice(offset, SettingSize).CopyTo(copy);
            source = copy;
        }

        var parameter = (Http2SettingsParameter)((source[0] << 8) | source[1]);
        uint value = BinaryPrimitives.ReadUInt32BigEndian(source.Slice(2));
        return new Http2Setting(parameter, value);
    }

    /// <summary>The value-range rules of RFC 9113 §6.5.2, all connection errors.</summary>
    private static void ValidateSetting(Http2Setting setting)
    {
        switch (setting.Parameter)
        {
            case Http2SettingsParameter.EnablePush when setting.Value > 1:
                // RFC 9113 §6.5.2: "Any value other than 0 or 1 MUST be treated as a connection error
                // (Section 5.4.1) of type PROTOCOL_ERROR."
                throw new Http2ConnectionException(
                    $"SETTINGS_ENABLE_PUSH of {setting.Value}; it must be 0 or 1.",
                    Http2ErrorCode.ProtocolError,
                    "settings_enable_push");

            case Http2SettingsParameter.InitialWindowSize when setting.Value > MaxWindowSize:
                // RFC 9113 §6.5.2: "Values above the maximum flow-control window size of 2^31-1 MUST be treated
                // as a connection error (Section 5.4.1) of type FLOW_CONTROL_ERROR."
                throw new Http2ConnectionException(
                    $"SETTINGS_INITIAL_WINDOW_SIZE of {setting.Value} exceeds 2^31-1.",
                    Http2ErrorCode.FlowControlError,
                    "settings_initial_window_size");

            case Http2SettingsParameter.MaxFrameSize when setting.Value < DefaultMaxFrameSize || setting.Value > MaxFramePayloadLength:
                // RFC 9113 §6.5.2: "The value advertised by an endpoint MUST be between this initial value and
                // the maximum allowed frame size (2^24-1 or 16,777,215 octets), inclusive. Values outside this
                // range MUST be treated as a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
                throw new Http2ConnectionException(
                    $"SETTINGS_MAX_FRAME_SIZE of {setting.Value} is outside [2^14, 2^24-1].",
                    Http2ErrorCode.ProtocolError,
                    "settings_max_frame_size");
        }
    }

    /// <summary>Parses PING (RFC 9113 §6.7); the opaque data is read big-endian, as the writer writes it.</summary>
    public static PingFrame ReadPing(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.7: "If a PING frame is received with a Stream Identifier field value other than 0x00, the
        // recipient MUST respond with a connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireZeroStream(header, "ping_stream_nonzero");

        // RFC 9113 §6.7: "Receipt of a PING frame with a length field value other than 8 MUST be treated as a
        // connection error (Section 5.4.1) of type FRAME_SIZE_ERROR."
        if (payload.Length != 8)
        {
            throw ConnectionFrameSizeError(header, "PING must be 8 octets", "ping_length");
        }

        return new PingFrame(ReadUInt64(payload, 0), header.HasFlag(Http2FrameFlags.Ack));
    }

    /// <summary>Parses GOAWAY (RFC 9113 §6.8). Unknown error codes are returned as they are (RFC 9113 §7).</summary>
    public static GoAwayFrame ReadGoAway(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.8: "An endpoint MUST treat a GOAWAY frame with a stream identifier other than 0x00 as a
        // connection error (Section 5.4.1) of type PROTOCOL_ERROR."
        RequireZeroStream(header, "goaway_stream_nonzero");

        // RFC 9113 §4.2: a frame "too small to contain mandatory frame data" is a FRAME_SIZE_ERROR, and a connection
        // error for any frame on stream 0. GOAWAY needs Last-Stream-ID and Error Code: 8 octets.
        if (payload.Length < 8)
        {
            throw ConnectionFrameSizeError(header, "GOAWAY needs at least 8 octets", "goaway_length");
        }

        int lastStreamId = (int)(ReadUInt32(payload, 0) & 0x7FFF_FFFFu);
        var errorCode = (Http2ErrorCode)ReadUInt32(payload, 4);
        return new GoAwayFrame(lastStreamId, errorCode, payload.Slice(8));
    }

    /// <summary>
    /// Parses WINDOW_UPDATE (RFC 9113 §6.9). A zero increment is returned, not thrown: RFC 9113 §6.9 makes it a
    /// stream error on a stream and a connection error on stream 0, and the engine knows which applies.
    /// </summary>
    public static WindowUpdateFrame ReadWindowUpdate(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.9: "A WINDOW_UPDATE frame with a length other than 4 octets MUST be treated as a connection
        // error (Section 5.4.1) of type FRAME_SIZE_ERROR."
        if (payload.Length != 4)
        {
            throw ConnectionFrameSizeError(header, "WINDOW_UPDATE must be 4 octets", "window_update_length");
        }

        // RFC 9113 §6.9: the reserved bit is ignored on receipt (§4.1).
        return new WindowUpdateFrame((int)(ReadUInt32(payload, 0) & 0x7FFF_FFFFu));
    }
}
