namespace Proxy.Codecs.Http2;

/// <summary>
/// Writes whole frames into an <see cref="IBufferWriter{T}"/>. Stateless; splitting DATA by
/// windows and max frame size is the caller's job (the frame-writer loop).
/// </summary>
public static class Http2FrameWriter
{
    public static void WriteData(IBufferWriter<byte> output, int streamId, ReadOnlySequence<byte> data, bool endStream) => throw new NotImplementedException();
    public static void WriteData(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> data, bool endStream) => throw new NotImplementedException();
    public static void WriteHeaders(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> headerBlockFragment, bool endStream, bool endHeaders) => throw new NotImplementedException();
    public static void WriteContinuation(IBufferWriter<byte> output, int streamId, ReadOnlySpan<byte> headerBlockFragment, bool endHeaders) => throw new NotImplementedException();
    public static void WritePriority(IBufferWriter<byte> output, int streamId, int streamDependency, bool exclusive, byte weight) => throw new NotImplementedException();
    public static void WriteRstStream(IBufferWriter<byte> output, int streamId, Http2ErrorCode errorCode) => throw new NotImplementedException();
    public static void WriteSettings(IBufferWriter<byte> output, ReadOnlySpan<Http2Setting> settings) => throw new NotImplementedException();
    public static void WriteSettingsAck(IBufferWriter<byte> output) => throw new NotImplementedException();
    public static void WritePushPromise(IBufferWriter<byte> output, int streamId, int promisedStreamId, ReadOnlySpan<byte> headerBlockFragment, bool endHeaders) => throw new NotImplementedException();
    public static void WritePing(IBufferWriter<byte> output, ulong opaqueData, bool ack) => throw new NotImplementedException();
    public static void WriteGoAway(IBufferWriter<byte> output, int lastStreamId, Http2ErrorCode errorCode, ReadOnlySpan<byte> debugData) => throw new NotImplementedException();
    public static void WriteWindowUpdate(IBufferWriter<byte> output, int streamId, int increment) => throw new NotImplementedException();

    /// <summary>Writes only a 9-octet frame header (for callers that write the payload themselves).</summary>
    public static void WriteFrameHeader(Span<byte> destination, in Http2FrameHeader header) => throw new NotImplementedException();
}
