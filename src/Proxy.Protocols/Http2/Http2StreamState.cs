namespace Proxy.Protocols.Http2;

/// <summary>
/// Stream states of RFC 9113 §5.1, as a server sees them (no PUSH_PROMISE, so no reserved states).
/// <code>
///                          +--------+
///                  recv H  |        |
///             ,------------+  idle  |
///            /             |        |
///           v              +--------+
///     +----------+             |
///     |          |             | recv H (END_STREAM)
///     |   open   |             |
///     |          |---------.   |
///     +----------+ recv ES  \  |
///       |   send ES          v v
///       |            +----------+
///       v            |   half   |
///  +----------+      |  closed  |
///  |   half   |      | (remote) |
///  |  closed  |      +----------+
///  |  (local) |            |
///  +----------+            | send ES / send R / recv R
///       | recv ES / send R v
///       |  / recv R   +--------+
///       `-----------> | closed |
///                     +--------+
///  H: HEADERS frame   ES: END_STREAM flag   R: RST_STREAM frame
/// </code>
/// The read loop owns a stream's state: "send ES" reaches it as an event from the frame-writer
/// loop once END_STREAM is on the wire.
/// </summary>
internal enum Http2StreamState
{
    Idle,
    Open,
    HalfClosedRemote,
    HalfClosedLocal,
    Closed,
}

/// <summary>The transitions of <see cref="Http2StreamState"/>; anything else is a bug in the engine.</summary>
internal static class Http2StreamStateMachine
{
    public static Http2StreamState OnHeadersReceived(bool endStream)
        => endStream ? Http2StreamState.HalfClosedRemote : Http2StreamState.Open;

    public static Http2StreamState OnEndStreamReceived(Http2StreamState state) => state switch
    {
        Http2StreamState.Open => Http2StreamState.HalfClosedRemote,
        Http2StreamState.HalfClosedLocal => Http2StreamState.Closed,
        _ => throw new InvalidOperationException($"END_STREAM received in state {state}."),
    };

    public static Http2StreamState OnEndStreamSent(Http2StreamState state) => state switch
    {
        Http2StreamState.Open => Http2StreamState.HalfClosedLocal,
        Http2StreamState.HalfClosedRemote => Http2StreamState.Closed,
        Http2StreamState.Closed => Http2StreamState.Closed,
        _ => throw new InvalidOperationException($"END_STREAM sent in state {state}."),
    };

    /// <summary>RST_STREAM sent or received: closed from any state.</summary>
    public static Http2StreamState OnReset(Http2StreamState state) => Http2StreamState.Closed;

    /// <summary>True when the peer may still send DATA (RFC 9113 §5.1: open or half-closed (local)).</summary>
    public static bool CanReceiveData(Http2StreamState state)
        => state is Http2StreamState.Open or Http2StreamState.HalfClosedLocal;
}
