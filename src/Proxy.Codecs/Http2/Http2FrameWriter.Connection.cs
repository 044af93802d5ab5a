using System.Buffers.Binary;

namespace Proxy.Codecs.Http2;

// Writers of the frames that (also) act on the connection: SETTINGS, PING, GOAWAY and WINDOW_UPDATE
// (RFC 9113 §6.5, §6.7-§6.9).
public static partial class Http2FrameWriter
{
    /// <summary>Writes SETTINGS (RFC 9113 §6.5) on stream 0 with the given parameters, in order.</summary>
    public static void WriteSettings(IBufferWriter<byte> output, ReadOnlySpan<Http2Setting> settings)
    {
        int length = settings.Length * Http2FrameReader.SettingSize;
        CheckPayloadLength(length, nameof(settings));
        WriteHeader(output, length, Http2FrameType.Settings, Http2FrameFlags.None, streamId: 0);
        foreach (Http2Setting setting in settings)
        {
            Span<byte> span = output.GetSpan(Http2FrameReader.SettingSize);
            BinaryPrimitives.WriteUInt16BigEndian(span, (ushort)setting.Parameter);
            BinaryPrimitives.WriteUInt32BigEndian(span.Slice(2), setting.Value);
            output.Advance(Http2FrameReader.SettingSize);
        }
    }

    /// <summary>Writes an empty SETTINGS frame with ACK (RFC 9113 §6.5.3).</summary>
    public static void WriteSettingsAck(IBufferWriter<byte> output)
    {
        BeginFixedFrame(output, 0, Http2FrameType.Settings, Http2FrameFlags.Ack, streamId: 0);
        output.Advance(Http2FrameHeader.Size);
    }

    /// <summary>Writes PING (RFC 9113 §6.7); the opaque data goes out big-endian, as the reader reads it.</summary>
    public static void WritePing(IBufferWriter<byte> output, ulong opaqueData, bool ack)
    {
        Span<byte> payload = BeginFixedFrame(output, 8, Http2FrameType.Ping, ack ? Http2FrameFlags.Ack : Http2FrameFlags.None, streamId: 0);
        BinaryPrimitives.WriteUInt64BigEndian(payload, opaqueData);
        output.Advance(Http2FrameHeader.Size + 8);
    }

    /// <summary>Writes GOAWAY (RFC 9113 §6.8) with optional opaque debug data.</summary>
    public static void WriteGoAway(IBufferWriter<byte> output, int lastStreamId, Http2ErrorCode errorCode, ReadOnlySpan<byte> debugData)
    {
        CheckId(lastStreamId, nameof(lastStreamId));
        CheckPayloadLength(8L + debugData.Length, nameof(debugData));
        WriteHeader(output, 8 + debugData.Length, Http2FrameType.GoAway, Http2FrameFlags.None, streamId: 0);
        Span<byte> fixedFields = output.GetSpan(8);
        BinaryPrimitives.WriteUInt32BigEndian(fixedFields, (uint)lastStreamId);
        BinaryPrimitives.WriteUInt32BigEndian(fixedFields.Slice(4), (uint)errorCode);
        output.Advance(8);
        CopyPayload(output, debugData);
    }

    /// <summary>
    /// Writes WINDOW_UPDATE (RFC 9113 §6.9). A zero increment is written as asked (RFC 9113 §6.9 forbids sending
    /// one; the engine never does, the test peer does on purpose).
    /// </summary>
    public static void WriteWindowUpdate(IBufferWriter<byte> output, int streamId, int increment)
    {
        CheckId(streamId, nameof(streamId));
        CheckId(increment, nameof(increment));
        Span<byte> payload = BeginFixedFrame(output, 4, Http2FrameType.WindowUpdate, Http2FrameFlags.None, streamId);
        BinaryPrimitives.WriteUInt32BigEndian(payload, (uint)increment);
        output.Advance(Http2FrameHeader.Size + 4);
    }
}
