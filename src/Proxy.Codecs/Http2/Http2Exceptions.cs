namespace Proxy.Codecs.Http2;

/// <summary>
/// A violation of RFC 9113. Connection errors end the connection with GOAWAY; stream errors
/// reset one stream with RST_STREAM. <see cref="Token"/> is a stable short name for metrics and logs.
/// </summary>
public abstract class Http2ProtocolException : Exception
{
    protected Http2ProtocolException(string message, Http2ErrorCode errorCode, string token)
        : base(message)
    {
        ErrorCode = errorCode;
        Token = token;
    }

    /// <summary>The RFC 9113 §7 code sent to the peer.</summary>
    public Http2ErrorCode ErrorCode { get; }

    /// <summary>A stable short name for metrics, e.g. "settings_ack_with_payload".</summary>
    public string Token { get; }
}

/// <summary>A connection error (RFC 9113 §5.4.1): GOAWAY with <see cref="Http2ProtocolException.ErrorCode"/>, then close.</summary>
public sealed class Http2ConnectionException : Http2ProtocolException
{
    public Http2ConnectionException(string message, Http2ErrorCode errorCode, string token)
        : base(message, errorCode, token)
    {
    }
}

/// <summary>A stream error (RFC 9113 §5.4.2): RST_STREAM on <see cref="StreamId"/>; the connection carries on.</summary>
public sealed class Http2StreamException : Http2ProtocolException
{
    public Http2StreamException(int streamId, string message, Http2ErrorCode errorCode, string token)
        : base(message, errorCode, token)
    {
        StreamId = streamId;
    }

    public int StreamId { get; }
}
