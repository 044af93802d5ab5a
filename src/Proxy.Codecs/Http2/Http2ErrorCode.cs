namespace Proxy.Codecs.Http2;

/// <summary>Error codes of RFC 9113 §7, carried by RST_STREAM and GOAWAY.</summary>
public enum Http2ErrorCode : uint
{
    /// <summary>NO_ERROR (0x0): graceful shutdown.</summary>
    NoError = 0x0,
    /// <summary>PROTOCOL_ERROR (0x1).</summary>
    ProtocolError = 0x1,
    /// <summary>INTERNAL_ERROR (0x2).</summary>
    InternalError = 0x2,
    /// <summary>FLOW_CONTROL_ERROR (0x3).</summary>
    FlowControlError = 0x3,
    /// <summary>SETTINGS_TIMEOUT (0x4).</summary>
    SettingsTimeout = 0x4,
    /// <summary>STREAM_CLOSED (0x5).</summary>
    StreamClosed = 0x5,
    /// <summary>FRAME_SIZE_ERROR (0x6).</summary>
    FrameSizeError = 0x6,
    /// <summary>REFUSED_STREAM (0x7).</summary>
    RefusedStream = 0x7,
    /// <summary>CANCEL (0x8).</summary>
    Cancel = 0x8,
    /// <summary>COMPRESSION_ERROR (0x9).</summary>
    CompressionError = 0x9,
    /// <summary>CONNECT_ERROR (0xa).</summary>
    ConnectError = 0xa,
    /// <summary>ENHANCE_YOUR_CALM (0xb).</summary>
    EnhanceYourCalm = 0xb,
    /// <summary>INADEQUATE_SECURITY (0xc).</summary>
    InadequateSecurity = 0xc,
    /// <summary>HTTP_1_1_REQUIRED (0xd).</summary>
    Http11Required = 0xd,
}
