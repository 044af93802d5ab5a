namespace Proxy.Codecs.Http2;

/// <summary>Frame types of RFC 9113 §6.</summary>
public enum Http2FrameType : byte
{
    /// <summary>DATA (0x0).</summary>
    Data = 0x0,
    /// <summary>HEADERS (0x1).</summary>
    Headers = 0x1,
    /// <summary>PRIORITY (0x2), deprecated by RFC 9113 §5.3.2 but still parsed.</summary>
    Priority = 0x2,
    /// <summary>RST_STREAM (0x3).</summary>
    RstStream = 0x3,
    /// <summary>SETTINGS (0x4).</summary>
    Settings = 0x4,
    /// <summary>PUSH_PROMISE (0x5).</summary>
    PushPromise = 0x5,
    /// <summary>PING (0x6).</summary>
    Ping = 0x6,
    /// <summary>GOAWAY (0x7).</summary>
    GoAway = 0x7,
    /// <summary>WINDOW_UPDATE (0x8).</summary>
    WindowUpdate = 0x8,
    /// <summary>CONTINUATION (0x9).</summary>
    Continuation = 0x9,
}

/// <summary>Frame flags of RFC 9113 §6. The same bit means different things per type.</summary>
[Flags]
public enum Http2FrameFlags : byte
{
    None = 0x0,
    /// <summary>END_STREAM (0x1) on DATA and HEADERS.</summary>
    EndStream = 0x1,
    /// <summary>ACK (0x1) on SETTINGS and PING.</summary>
    Ack = 0x1,
    /// <summary>END_HEADERS (0x4) on HEADERS, PUSH_PROMISE and CONTINUATION.</summary>
    EndHeaders = 0x4,
    /// <summary>PADDED (0x8) on DATA, HEADERS and PUSH_PROMISE.</summary>
    Padded = 0x8,
    /// <summary>PRIORITY (0x20) on HEADERS.</summary>
    Priority = 0x20,
}

/// <summary>SETTINGS parameters of RFC 9113 §6.5.2.</summary>
public enum Http2SettingsParameter : ushort
{
    /// <summary>SETTINGS_HEADER_TABLE_SIZE (0x1).</summary>
    HeaderTableSize = 0x1,
    /// <summary>SETTINGS_ENABLE_PUSH (0x2).</summary>
    EnablePush = 0x2,
    /// <summary>SETTINGS_MAX_CONCURRENT_STREAMS (0x3).</summary>
    MaxConcurrentStreams = 0x3,
    /// <summary>SETTINGS_INITIAL_WINDOW_SIZE (0x4).</summary>
    InitialWindowSize = 0x4,
    /// <summary>SETTINGS_MAX_FRAME_SIZE (0x5).</summary>
    MaxFrameSize = 0x5,
    /// <summary>SETTINGS_MAX_HEADER_LIST_SIZE (0x6).</summary>
    MaxHeaderListSize = 0x6,
    /// <summary>SETTINGS_ENABLE_CONNECT_PROTOCOL (0x8), RFC 8441.</summary>
    EnableConnectProtocol = 0x8,
}
