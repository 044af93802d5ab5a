using Proxy.Codecs.Http2;

namespace Proxy.Protocols;

/// <summary>
/// What a server connection engine reports about itself, for the host's metrics (Proxy.Server turns these into the
/// "Proxy.Server" meter's instruments). Null in <see cref="ConnectionMetadata.Metrics"/> means nobody counts.
/// </summary>
/// <remarks>
/// NOTE: an interface the host implements, so the engines need no System.Diagnostics.Metrics types and no tags: the
/// host keeps its precomputed tag arrays. Calls come from the read loop, the writer loop and stream handlers, so an
/// implementation must be thread-safe and cheap; the <c>*Enabled</c> properties let a loop skip the timestamps and
/// counting that only a listener needs.
/// </remarks>
public interface IProtocolMetrics
{
    /// <summary>
    /// An HTTP/2 stream was opened and its request handed to the app (read loop). Returns whether it was counted: only a
    /// counted stream reports <see cref="StreamEnded"/>, so a listener that subscribes meanwhile never sees a lone -1.
    /// </summary>
    bool StreamStarted();

    /// <summary>The app's handler for a counted stream finished (the stream's handler task).</summary>
    void StreamEnded();

    /// <summary>RST_STREAM written (<paramref name="sent"/>) or received, with its error code.</summary>
    void StreamReset(bool sent, Http2ErrorCode code);

    /// <summary>A new stream was refused (REFUSED_STREAM: over the concurrency limit, or after GOAWAY).</summary>
    void StreamRefused();

    /// <summary>GOAWAY written (<paramref name="sent"/>) or received, with its error code.</summary>
    void GoAway(bool sent, Http2ErrorCode code);

    /// <summary>Whether <see cref="FlowControlStalled"/> has a listener (read by the writer loop before timing a stall).</summary>
    bool FlowControlStallEnabled { get; }

    /// <summary>A stream had data but no send window for <paramref name="duration"/> (writer loop).</summary>
    void FlowControlStalled(TimeSpan duration);

    /// <summary>Whether <see cref="WriterBatch"/> has a listener.</summary>
    bool WriterBatchEnabled { get; }

    /// <summary>One transport flush of the frame-writer loop: how many frames and bytes it carried.</summary>
    void WriterBatch(int frames, long bytes);
}
