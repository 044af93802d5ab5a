using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>The values of one peer SETTINGS frame that our connections act on (null: not in the frame).</summary>
internal readonly record struct PeerSettingsValues(int? HeaderTableSize, int? InitialWindowSize, int? MaxFrameSize, uint? MaxConcurrentStreams, uint? EnablePush)
{
    /// <summary>What the frame-writer loop applies (encoder table, outbound windows, frame size).</summary>
    public PeerSettingsChange ForWriter => new(HeaderTableSize, InitialWindowSize, MaxFrameSize);
}

/// <summary>
/// Reads the parameters of a SETTINGS frame for either role and enforces the value ranges of RFC 9113 §6.5.2 that hold
/// for both (length, stream id and ACK payload are the codec's). Role rules (ENABLE_PUSH from a server) stay with the caller.
/// </summary>
// Stateless.
internal static class PeerSettingsReader
{
    public static PeerSettingsValues Read(in ReadOnlySequence<byte> payload, int count)
    {
        int? tableSize = null, initialWindow = null, maxFrameSize = null;
        uint? maxConcurrentStreams = null, enablePush = null;
        for (var i = 0; i < count; i++)
        {
            var setting = Http2FrameReader.ReadSetting(payload, i);
            switch (setting.Parameter)
            {
                case Http2SettingsParameter.HeaderTableSize:
                    tableSize = (int)Math.Min(setting.Value, int.MaxValue);
                    break;
                case Http2SettingsParameter.InitialWindowSize:
                    // RFC 9113 §6.5.2: above 2^31-1 is a FLOW_CONTROL_ERROR connection error.
                    if (setting.Value > int.MaxValue)
                    {
                        throw new Http2ConnectionException("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1.", Http2ErrorCode.FlowControlError, "initial_window_too_large");
                    }
                    initialWindow = (int)setting.Value;
                    break;
                case Http2SettingsParameter.MaxFrameSize:
                    // RFC 9113 §6.5.2: between 2^14 and 2^24-1, else PROTOCOL_ERROR.
                    if (setting.Value is < 16_384 or > 16_777_215)
                    {
                        throw new Http2ConnectionException("SETTINGS_MAX_FRAME_SIZE out of range.", Http2ErrorCode.ProtocolError, "max_frame_size_range");
                    }
                    maxFrameSize = (int)setting.Value;
                    break;
                case Http2SettingsParameter.EnablePush:
                    // RFC 9113 §6.5.2: only 0 or 1, else PROTOCOL_ERROR.
                    if (setting.Value > 1)
                    {
                        throw new Http2ConnectionException("SETTINGS_ENABLE_PUSH not 0 or 1.", Http2ErrorCode.ProtocolError, "enable_push_range");
                    }
                    enablePush = setting.Value;
                    break;
                case Http2SettingsParameter.MaxConcurrentStreams:
                    maxConcurrentStreams = setting.Value;
                    break;
                default:
                    break; // unknown settings are ignored (§6.5.2)
            }
        }
        return new PeerSettingsValues(tableSize, initialWindow, maxFrameSize, maxConcurrentStreams, enablePush);
    }
}
