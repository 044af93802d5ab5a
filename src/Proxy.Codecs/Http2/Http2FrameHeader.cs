namespace Proxy.Codecs.Http2;

/// <summary>
/// The fixed 9-octet frame header of RFC 9113 §4.1.
/// <code>
/// HTTP Frame {
///   Length (24),
///   Type (8),
///   Flags (8),
///   Reserved (1),
///   Stream Identifier (31),
///   Frame Payload (..),
/// }
/// </code>
/// </summary>
public readonly record struct Http2FrameHeader(int Length, Http2FrameType Type, Http2FrameFlags Flags, int StreamId)
{
    /// <summary>Size of the frame header on the wire.</summary>
    public const int Size = 9;

    public bool HasFlag(Http2FrameFlags flag) => (Flags & flag) == flag;
}
