namespace Proxy.Codecs.Http2;

// Parsed frames. Every frame type parses from a payload sequence (no allocation, slices of the
// caller's buffer) with Http2FrameReader and is written by Http2FrameWriter into an IBufferWriter<byte>.
// Each parser enforces the RFC 9113 §6 MUSTs that need nothing but the frame itself
// (lengths, stream id zero/non-zero, padding) and throws Http2ConnectionException or
// Http2StreamException with the right code. State rules (stream state, SETTINGS values
// that need connection context) belong to the connection engine.
// The layouts below are RFC 9113's; every frame starts with the 9-octet header of §4.1 (Http2FrameHeader).

/// <summary>
/// DATA (RFC 9113 §6.1). <see cref="Data"/> excludes padding; <see cref="FlowControlledLength"/> is the whole payload length.
/// <code>
/// DATA Frame {
///   Length (24),
///   Type (8) = 0x00,
///   Unused Flags (4),
///   PADDED Flag (1),
///   Unused Flags (2),
///   END_STREAM Flag (1),
///   Reserved (1),
///   Stream Identifier (31),
///   [Pad Length (8)],
///   Data (..),
///   Padding (..2040),
/// }
/// </code>
/// </summary>
public readonly record struct DataFrame(ReadOnlySequence<byte> Data, bool EndStream, int FlowControlledLength);

/// <summary>
/// HEADERS (RFC 9113 §6.2). Priority fields are parsed and exposed, then ignored by the engine (RFC 9113 §5.3.2),
/// except that a dependency on the frame's own stream is a stream PROTOCOL_ERROR the engine checks (RFC 9113 §5.3.1).
/// <see cref="Weight"/> is the wire value (weight minus one).
/// <code>
/// HEADERS Frame {
///   Length (24),
///   Type (8) = 0x01,
///   Unused Flags (2),
///   PRIORITY Flag (1),
///   Unused Flag (1),
///   PADDED Flag (1),
///   END_HEADERS Flag (1),
///   Unused Flag (1),
///   END_STREAM Flag (1),
///   Reserved (1),
///   Stream Identifier (31),
///   [Pad Length (8)],
///   [Exclusive (1)],
///   [Stream Dependency (31)],
///   [Weight (8)],
///   Field Block Fragment (..),
///   Padding (..2040),
/// }
/// </code>
/// </summary>
public readonly record struct HeadersFrame(ReadOnlySequence<byte> HeaderBlockFragment, bool EndStream, bool EndHeaders, bool HasPriority, int StreamDependency, bool Exclusive, byte Weight);

/// <summary>
/// PRIORITY (RFC 9113 §6.3), deprecated (§5.3.2) but still parsed and validated. <see cref="Weight"/> is the wire value.
/// <code>
/// PRIORITY Frame {
///   Length (24) = 0x05,
///   Type (8) = 0x02,
///   Unused Flags (8),
///   Reserved (1),
///   Stream Identifier (31),
///   Exclusive (1),
///   Stream Dependency (31),
///   Weight (8),
/// }
/// </code>
/// </summary>
public readonly record struct PriorityFrame(int StreamDependency, bool Exclusive, byte Weight);

/// <summary>
/// RST_STREAM (RFC 9113 §6.4).
/// <code>
/// RST_STREAM Frame {
///   Length (24) = 0x04,
///   Type (8) = 0x03,
///   Unused Flags (8),
///   Reserved (1),
///   Stream Identifier (31),
///   Error Code (32),
/// }
/// </code>
/// </summary>
public readonly record struct RstStreamFrame(Http2ErrorCode ErrorCode);

/// <summary>
/// One SETTINGS parameter (RFC 9113 §6.5.1). Unknown identifiers are kept so the engine can ignore them.
/// <code>
/// SETTINGS Frame {
///   Length (24),
///   Type (8) = 0x04,
///   Unused Flags (7),
///   ACK Flag (1),
///   Reserved (1),
///   Stream Identifier (31) = 0,
///   Setting (48) ...,
/// }
///
/// Setting {
///   Identifier (16),
///   Value (32),
/// }
/// </code>
/// </summary>
public readonly record struct Http2Setting(Http2SettingsParameter Parameter, uint Value);

/// <summary>
/// PUSH_PROMISE (RFC 9113 §6.6). A server never accepts one; parsed for the scripted test peer.
/// <code>
/// PUSH_PROMISE Frame {
///   Length (24),
///   Type (8) = 0x05,
///   Unused Flags (4),
///   PADDED Flag (1),
///   END_HEADERS Flag (1),
///   Unused Flags (2),
///   Reserved (1),
///   Stream Identifier (31),
///   [Pad Length (8)],
///   Reserved (1),
///   Promised Stream ID (31),
///   Field Block Fragment (..),
///   Padding (..2040),
/// }
/// </code>
/// </summary>
public readonly record struct PushPromiseFrame(int PromisedStreamId, ReadOnlySequence<byte> HeaderBlockFragment, bool EndHeaders);

/// <summary>
/// PING (RFC 9113 §6.7). <see cref="OpaqueData"/> is the 8 octets read big-endian.
/// <code>
/// PING Frame {
///   Length (24) = 0x08,
///   Type (8) = 0x06,
///   Unused Flags (7),
///   ACK Flag (1),
///   Reserved (1),
///   Stream Identifier (31) = 0,
///   Opaque Data (64),
/// }
/// </code>
/// </summary>
public readonly record struct PingFrame(ulong OpaqueData, bool IsAck);

/// <summary>
/// GOAWAY (RFC 9113 §6.8).
/// <code>
/// GOAWAY Frame {
///   Length (24),
///   Type (8) = 0x07,
///   Unused Flags (8),
///   Reserved (1),
///   Stream Identifier (31) = 0,
///   Reserved (1),
///   Last-Stream-ID (31),
///   Error Code (32),
///   Additional Debug Data (..),
/// }
/// </code>
/// </summary>
public readonly record struct GoAwayFrame(int LastStreamId, Http2ErrorCode ErrorCode, ReadOnlySequence<byte> DebugData);

/// <summary>
/// WINDOW_UPDATE (RFC 9113 §6.9). A zero increment is reported, not thrown, because its error kind depends on the stream id.
/// <code>
/// WINDOW_UPDATE Frame {
///   Length (24) = 0x04,
///   Type (8) = 0x08,
///   Unused Flags (8),
///   Reserved (1),
///   Stream Identifier (31),
///   Reserved (1),
///   Window Size Increment (31),
/// }
/// </code>
/// </summary>
public readonly record struct WindowUpdateFrame(int WindowSizeIncrement);

/// <summary>
/// CONTINUATION (RFC 9113 §6.10).
/// <code>
/// CONTINUATION Frame {
///   Length (24),
///   Type (8) = 0x09,
///   Unused Flags (5),
///   END_HEADERS Flag (1),
///   Unused Flags (2),
///   Reserved (1),
///   Stream Identifier (31),
///   Field Block Fragment (..),
/// }
/// </code>
/// </summary>
public readonly record struct ContinuationFrame(ReadOnlySequence<byte> HeaderBlockFragment, bool EndHeaders);
