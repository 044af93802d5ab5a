using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>What the frame-writer loop is asked to do. A small closed set instead of an untyped object channel.</summary>
internal enum WriterMessageKind : byte
{
    /// <summary>A stream has response headers, body bytes or its end ready: schedule it.</summary>
    StreamOutput,
    /// <summary>Apply the peer's SETTINGS to outbound state, then write SETTINGS with ACK (RFC 9113 §6.5.3).</summary>
    PeerSettings,
    /// <summary>PING with ACK echoing the peer's payload (RFC 9113 §6.7).</summary>
    PingAck,
    /// <summary>A PING of our own (graceful shutdown round trip).</summary>
    Ping,
    /// <summary>WINDOW_UPDATE we send: receive credit returned to the peer.</summary>
    WindowUpdate,
    /// <summary>The peer's WINDOW_UPDATE: raises an outbound window the writer owns.</summary>
    PeerWindowUpdate,
    /// <summary>RST_STREAM we send; the stream's output stops first.</summary>
    RstStream,
    /// <summary>The peer reset the stream (or the connection is closing it): stop its output, write nothing.</summary>
    StopStream,
    /// <summary>A response the engine makes on its own (431) for a stream it will not hand to the app.</summary>
    RejectStream,
    /// <summary>GOAWAY.</summary>
    GoAway,
}

/// <summary>The peer's SETTINGS values that change outbound state (null: unchanged).</summary>
// NOTE: a class, so WriterMessage carries a reference (8 bytes) instead of three nullable ints (24): a SETTINGS frame is
// rare, and every message of every stream is copied into and out of the channel's queue, whose array a connection keeps.
internal sealed record PeerSettingsChange(int? HeaderTableSize, int? InitialWindowSize, int? MaxFrameSize);

/// <summary>One message of the writer channel. Which fields matter depends on <see cref="Kind"/>.</summary>
internal readonly struct WriterMessage
{
    private WriterMessage(WriterMessageKind kind, IHttp2OutputSource? stream = null, int streamId = 0, long value = 0,
        Http2ErrorCode errorCode = Http2ErrorCode.NoError, PeerSettingsChange? settings = null, bool isControl = false, bool flag = false)
    {
        Kind = kind;
        Stream = stream;
        StreamId = streamId;
        Value = value;
        ErrorCode = errorCode;
        Settings = settings;
        IsControl = isControl;
        Flag = flag;
    }

    public WriterMessageKind Kind { get; }
    public IHttp2OutputSource? Stream { get; }
    public int StreamId { get; }
    public long Value { get; }
    public Http2ErrorCode ErrorCode { get; }
    public PeerSettingsChange? Settings { get; }

    /// <summary>True when it counts toward <see cref="Http2Options.MaxQueuedControlFrames"/> while queued.</summary>
    public bool IsControl { get; }

    /// <summary>RstStream: skip when the stream already ended. RejectStream: also reset the stream with NO_ERROR after the response (the request had not ended).</summary>
    public bool Flag { get; }

    /// <summary>The same message, counted toward <see cref="Http2Options.MaxQueuedControlFrames"/> while queued (read-loop enqueues).</summary>
    public WriterMessage AsControl() => new(Kind, Stream, StreamId, Value, ErrorCode, Settings, isControl: true, Flag);

    public static WriterMessage StreamOutput(IHttp2OutputSource stream) => new(WriterMessageKind.StreamOutput, stream, stream.StreamId);
    public static WriterMessage PeerSettings(PeerSettingsChange change) => new(WriterMessageKind.PeerSettings, settings: change, isControl: true);
    public static WriterMessage PingAck(ulong payload) => new(WriterMessageKind.PingAck, value: (long)payload, isControl: true);
    public static WriterMessage Ping(ulong payload) => new(WriterMessageKind.Ping, value: (long)payload);
    public static WriterMessage WindowUpdate(int streamId, int increment, bool isControl = false) => new(WriterMessageKind.WindowUpdate, streamId: streamId, value: increment, isControl: isControl);
    public static WriterMessage PeerWindowUpdate(IHttp2OutputSource? stream, int increment) => new(WriterMessageKind.PeerWindowUpdate, stream, stream?.StreamId ?? 0, increment, isControl: true);
    /// <param name="skipIfEnded">An app abort after the stream already ended writes nothing.</param>
    public static WriterMessage RstStream(int streamId, IHttp2OutputSource? stream, Http2ErrorCode code, bool isControl, bool skipIfEnded = false)
        => new(WriterMessageKind.RstStream, stream, streamId, errorCode: code, isControl: isControl, flag: skipIfEnded);
    public static WriterMessage StopStream(IHttp2OutputSource stream) => new(WriterMessageKind.StopStream, stream, stream.StreamId);
    public static WriterMessage RejectStream(int streamId, int statusCode, bool resetAfter)
        => new(WriterMessageKind.RejectStream, streamId: streamId, value: statusCode, errorCode: Http2ErrorCode.NoError, isControl: true, flag: resetAfter);
    public static WriterMessage GoAway(int lastStreamId, Http2ErrorCode code) => new(WriterMessageKind.GoAway, streamId: lastStreamId, errorCode: code);
}
