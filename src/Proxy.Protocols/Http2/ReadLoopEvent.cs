using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

internal enum ReadLoopEventKind : byte
{
    /// <summary>The writer wrote the stream's last frame (END_STREAM) or stopped it (reset).</summary>
    OutputEnded,
    /// <summary>The app's handler returned and the response was completed.</summary>
    HandlerFinished,
    /// <summary>The writer found a protocol error (window overflow): handled at the read loop's one choke point.</summary>
    ProtocolError,
    /// <summary>The transport write failed.</summary>
    WriterFailed,
    /// <summary>The host asked for a graceful shutdown.</summary>
    Shutdown,
}

/// <summary>What other threads tell the read loop. Posted to a queue, then the read loop is woken.</summary>
internal readonly record struct ReadLoopEvent(ReadLoopEventKind Kind, IHttp2OutputSource? Stream, bool WasReset, Exception? Exception)
{
    public static ReadLoopEvent OutputEnded(IHttp2OutputSource stream, bool wasReset) => new(ReadLoopEventKind.OutputEnded, stream, wasReset, null);
    public static ReadLoopEvent HandlerFinished(Http2Stream stream) => new(ReadLoopEventKind.HandlerFinished, stream, false, null);
    public static ReadLoopEvent Error(Http2ProtocolException exception) => new(ReadLoopEventKind.ProtocolError, null, false, exception);
    public static ReadLoopEvent WriterFailed(Exception exception) => new(ReadLoopEventKind.WriterFailed, null, false, exception);
    public static ReadLoopEvent Shutdown() => new(ReadLoopEventKind.Shutdown, null, false, null);
}
