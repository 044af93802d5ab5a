namespace Proxy.Codecs.Http2;

// SIGNATURES ONLY (filled in by the frames work): every frame type parses from a payload
// sequence (no allocation) and is written by Http2FrameWriter into an IBufferWriter<byte>.
// Each parser enforces the RFC 9113 §6 MUSTs that need nothing but the frame itself
// (lengths, stream id zero/non-zero, padding) and throws Http2ConnectionException or
// Http2StreamException with the right code. State rules (stream state, SETTINGS values
// that need connection context) belong to the connection engine.

/// <summary>DATA (RFC 9113 §6.1). <see cref="Data"/> excludes padding; <see cref="FlowControlledLength"/> is the whole payload length.</summary>
public readonly record struct DataFrame(ReadOnlySequence<byte> Data, bool EndStream, int FlowControlledLength);

/// <summary>HEADERS (RFC 9113 §6.2). Priority fields are parsed and exposed, then ignored by the engine.</summary>
public readonly record struct HeadersFrame(ReadOnlySequence<byte> HeaderBlockFragment, bool EndStream, bool EndHeaders, bool HasPriority, int StreamDependency, bool Exclusive, byte Weight);

/// <summary>PRIORITY (RFC 9113 §6.3).</summary>
public readonly record struct PriorityFrame(int StreamDependency, bool Exclusive, byte Weight);

/// <summary>RST_STREAM (RFC 9113 §6.4).</summary>
public readonly record struct RstStreamFrame(Http2ErrorCode ErrorCode);

/// <summary>One SETTINGS parameter (RFC 9113 §6.5.1). Unknown identifiers are kept so the engine can ignore them.</summary>
public readonly record struct Http2Setting(Http2SettingsParameter Parameter, uint Value);

/// <summary>PUSH_PROMISE (RFC 9113 §6.6). A server never accepts one; parsed for the scripted test peer.</summary>
public readonly record struct PushPromiseFrame(int PromisedStreamId, ReadOnlySequence<byte> HeaderBlockFragment, bool EndHeaders);

/// <summary>PING (RFC 9113 §6.7).</summary>
public readonly record struct PingFrame(ulong OpaqueData, bool IsAck);

/// <summary>GOAWAY (RFC 9113 §6.8).</summary>
public readonly record struct GoAwayFrame(int LastStreamId, Http2ErrorCode ErrorCode, ReadOnlySequence<byte> DebugData);

/// <summary>WINDOW_UPDATE (RFC 9113 §6.9). A zero increment is reported, not thrown, because its error kind depends on the stream id.</summary>
public readonly record struct WindowUpdateFrame(int WindowSizeIncrement);

/// <summary>CONTINUATION (RFC 9113 §6.10).</summary>
public readonly record struct ContinuationFrame(ReadOnlySequence<byte> HeaderBlockFragment, bool EndHeaders);
