using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>
/// The outbound side of RFC 9113 §6.9 flow control for one connection: the connection send window, every stream's send
/// window (kept in its <see cref="Http2SendState"/>, moved by the peer's WINDOW_UPDATE and SETTINGS_INITIAL_WINDOW_SIZE),
/// the streams waiting for credit, and how long they waited (the stall metric). A waiting stream goes back to the
/// <see cref="StreamScheduler"/> when the WINDOW_UPDATE or SETTINGS it waits for gives it credit.
/// </summary>
/// <remarks>
/// The receive side (credit we grant) is <see cref="ReceiveWindow"/>, kept by the read loop. Windows are longs so a
/// peer's increment can be added before the 2^31-1 check, and a SETTINGS decrease can leave a window negative (§6.9.2).
/// </remarks>
// Owned by the frame-writer loop: only its thread touches it.
internal sealed class SendWindows
{
    /// <summary>The initial window of the connection and of every stream until SETTINGS say otherwise (RFC 9113 §6.9.2).</summary>
    public const int DefaultWindow = 65_535;

    private readonly StreamScheduler _scheduler;
    private readonly IProtocolMetrics? _metrics;
    private readonly TimeProvider _time;
    // Streams with data and stream window but no connection window: all go back to the scheduler on the next raise.
    private readonly List<IHttp2OutputSource> _connectionBlocked = new();
    // Streams whose window is tracked, so a SETTINGS_INITIAL_WINDOW_SIZE change reaches each of them.
    private readonly HashSet<IHttp2OutputSource> _streamsWithWindow = new();
    private long _connectionWindow = DefaultWindow;
    private int _peerInitialWindow = DefaultWindow;

    /// <param name="scheduler">Where a stream goes when the credit it waited for arrives.</param>
    /// <param name="metrics">Where stalls are counted (timed only while it has a listener), or null.</param>
    public SendWindows(StreamScheduler scheduler, TimeProvider time, IProtocolMetrics? metrics)
    {
        _scheduler = scheduler;
        _time = time;
        _metrics = metrics;
    }

    /// <summary>What the connection window still allows us to send.</summary>
    public long ConnectionWindow => _connectionWindow;

    /// <summary>The peer's SETTINGS_INITIAL_WINDOW_SIZE as last applied.</summary>
    public int PeerInitialWindow => _peerInitialWindow;

    /// <summary>
    /// Starts tracking a stream the loop has not seen in this life: its window is the peer's current initial window, which is
    /// what applying every SETTINGS delta since its creation would give (RFC 9113 §6.9.2). No-op once tracked.
    /// </summary>
    public void Track(IHttp2OutputSource stream)
    {
        var send = stream.Send;
        if (!send.SendWindowInitialized)
        {
            send.SendWindowInitialized = true;
            send.SendWindow = _peerInitialWindow;
            _streamsWithWindow.Add(stream);
        }
    }

    /// <summary>
    /// Bytes of <paramref name="available"/> the next DATA frame may carry within the stream and connection windows
    /// (RFC 9113 §6.9.1); the caller bounds <paramref name="available"/> by the peer's max frame size. Zero or less: wait.
    /// </summary>
    public long Allowance(IHttp2OutputSource stream, long available)
        => Math.Min(Math.Min(stream.Send.SendWindow, _connectionWindow), available);

    /// <summary>
    /// <paramref name="bytes"/> of DATA left for the stream: both windows shrink, and a stall the stream was in ends
    /// (how long it waited is one stall).
    /// </summary>
    public void Debit(IHttp2OutputSource stream, long bytes)
    {
        EndStall(stream);
        stream.Send.SendWindow -= bytes;
        _connectionWindow -= bytes;
    }

    /// <summary>
    /// A stream with data but no window: it is scheduled again by the WINDOW_UPDATE (stream or connection) or the
    /// SETTINGS it waits for. The stall is timed from the first wait while the metric has a listener.
    /// </summary>
    public void WaitForWindow(IHttp2OutputSource stream)
    {
        var send = stream.Send;
        if (send.StallStart == 0 && _metrics is { FlowControlStallEnabled: true })
        {
            send.StallStart = _time.GetTimestamp();
        }
        if (send.SendWindow <= 0)
        {
            send.BlockedOnStreamWindow = true;
        }
        else if (!send.InConnectionBlockedList)
        {
            send.InConnectionBlockedList = true;
            _connectionBlocked.Add(stream);
        }
    }

    /// <summary>The stream sends nothing more: its stall ends, and it leaves the tracked set and the blocked list.</summary>
    public void Release(IHttp2OutputSource stream)
    {
        EndStall(stream);
        _streamsWithWindow.Remove(stream);
        if (stream.Send.InConnectionBlockedList)
        {
            // Waiting for connection credit no longer: do not keep the stream until a WINDOW_UPDATE arrives.
            stream.Send.InConnectionBlockedList = false;
            _connectionBlocked.Remove(stream);
        }
    }

    /// <summary>The connection ends: every tracked stream, for the loop to stop; nothing stays tracked.</summary>
    public IHttp2OutputSource[] ReleaseAll()
    {
        var streams = _streamsWithWindow.ToArray();
        _streamsWithWindow.Clear();
        return streams;
    }

    /// <summary>
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE. RFC 9113 §6.9.2: the delta applies to every stream's window, which may go
    /// negative; a result above 2^31-1 is a FLOW_CONTROL_ERROR connection error. A stream a raise unblocks is scheduled.
    /// </summary>
    /// <returns>The connection error to report, or null.</returns>
    public Http2ConnectionException? ApplyInitialWindowSize(int initial)
    {
        long delta = initial - _peerInitialWindow;
        _peerInitialWindow = initial;
        // NOTE: the set is walked in place (no copy per SETTINGS): scheduling a stream does not change it.
        foreach (var stream in _streamsWithWindow)
        {
            var send = stream.Send;
            send.SendWindow += delta;
            if (send.SendWindow > int.MaxValue)
            {
                return new Http2ConnectionException(
                    "SETTINGS_INITIAL_WINDOW_SIZE made a stream window exceed 2^31-1.", Http2ErrorCode.FlowControlError, "initial_window_overflow");
            }
            if (delta > 0 && send.BlockedOnStreamWindow && send.SendWindow > 0)
            {
                send.BlockedOnStreamWindow = false;
                _scheduler.Schedule(stream);
            }
        }
        return null;
    }

    /// <summary>
    /// The peer's WINDOW_UPDATE for the connection (<paramref name="stream"/> null) or a stream. RFC 9113 §6.9.1: a window
    /// above 2^31-1 is a FLOW_CONTROL_ERROR, a connection error on the connection window and a stream error on a stream's.
    /// </summary>
    /// <returns>The error to report, or null.</returns>
    public Http2ProtocolException? ApplyWindowUpdate(IHttp2OutputSource? stream, int increment)
    {
        if (stream is null)
        {
            _connectionWindow += increment;
            if (_connectionWindow > int.MaxValue)
            {
                return new Http2ConnectionException(
                    "WINDOW_UPDATE made the connection window exceed 2^31-1.", Http2ErrorCode.FlowControlError, "connection_window_overflow");
            }
            if (_connectionWindow > 0)
            {
                foreach (var blocked in _connectionBlocked)
                {
                    blocked.Send.InConnectionBlockedList = false;
                    _scheduler.Schedule(blocked);
                }
                _connectionBlocked.Clear();
            }
            return null;
        }
        var send = stream.Send;
        if (send.OutputStopped && !send.SendWindowInitialized)
        {
            return null; // RFC 9113 §6.9: WINDOW_UPDATE on a closed stream is allowed and ignored
        }
        // A stream whose output ended is still half-closed (local) for the peer, which may send WINDOW_UPDATE;
        // the window is still tracked so an overflow is still a stream error.
        Track(stream);
        send.SendWindow += increment;
        if (send.SendWindow > int.MaxValue)
        {
            // The life the update was queued for (Handle adopted it), not a second read of a pooled stream's id.
            return new Http2StreamException(send.WriterStreamId,
                "WINDOW_UPDATE made the stream window exceed 2^31-1.", Http2ErrorCode.FlowControlError, "stream_window_overflow");
        }
        if (send.BlockedOnStreamWindow && send.SendWindow > 0 && !send.OutputStopped)
        {
            send.BlockedOnStreamWindow = false;
            _scheduler.Schedule(stream);
        }
        return null;
    }

    private void EndStall(IHttp2OutputSource stream)
    {
        if (stream.Send.StallStart != 0)
        {
            _metrics?.FlowControlStalled(_time.GetElapsedTime(stream.Send.StallStart));
            stream.Send.StallStart = 0;
        }
    }
}
