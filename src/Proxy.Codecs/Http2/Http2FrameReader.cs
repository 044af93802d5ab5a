namespace Proxy.Codecs.Http2;

/// <summary>
/// Allocation-free frame parsing over <see cref="ReadOnlySequence{T}"/>. Stateless: the caller
/// (the connection read loop) owns the buffer and the settings it passes in.
/// </summary>
public static class Http2FrameReader
{
    /// <summary>The client connection preface, RFC 9113 §3.4.</summary>
    public static ReadOnlySpan<byte> ClientPreface => "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8;

    /// <summary>
    /// Reads one whole frame from the front of <paramref name="buffer"/> and slices it off.
    /// Returns false when more bytes are needed. Throws a FRAME_SIZE_ERROR connection error
    /// when the length exceeds <paramref name="maxFrameSize"/> (RFC 9113 §4.2).
    /// </summary>
    public static bool TryReadFrame(ref ReadOnlySequence<byte> buffer, int maxFrameSize, out Http2FrameHeader header, out ReadOnlySequence<byte> payload)
        => throw new NotImplementedException();

    public static DataFrame ReadData(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static HeadersFrame ReadHeaders(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static PriorityFrame ReadPriority(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static RstStreamFrame ReadRstStream(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();

    /// <summary>
    /// Validates a SETTINGS frame (length multiple of 6, stream 0, ACK with empty payload) and
    /// returns its parameter count; read each with <see cref="ReadSetting"/>.
    /// Value-range rules (ENABLE_PUSH 0/1, INITIAL_WINDOW_SIZE ≤ 2^31-1, MAX_FRAME_SIZE range) are enforced here too.
    /// </summary>
    public static int ReadSettings(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static Http2Setting ReadSetting(in ReadOnlySequence<byte> payload, int index) => throw new NotImplementedException();

    public static PushPromiseFrame ReadPushPromise(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static PingFrame ReadPing(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static GoAwayFrame ReadGoAway(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static WindowUpdateFrame ReadWindowUpdate(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
    public static ContinuationFrame ReadContinuation(in Http2FrameHeader header, in ReadOnlySequence<byte> payload) => throw new NotImplementedException();
}
