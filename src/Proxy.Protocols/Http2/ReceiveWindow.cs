namespace Proxy.Protocols.Http2;

/// <summary>
/// One receive window of RFC 9113 §6.9 (a connection's or a stream's), seen from the side that grants it: what the peer
/// may still send, and the bytes consumed but not yet given back. Credit goes back in steps (half the window), not
/// per frame; a connection also returns smaller steps once its window runs low, so bytes one stream leaves unread do not
/// stall the others. The read loop debits; whoever consumes returns credit: every member is atomic.
/// </summary>
/// <remarks>
/// A mutable struct kept as a field and used in place (never copied), so streams pay no allocation for it. The server's
/// and the client's connections and streams all use it: credit is granted one way in this code base.
/// </remarks>
// Shared (atomics): the read loop debits, consumers return credit from any thread.
internal struct ReceiveWindow
{
    private int _available;
    private int _pending;
    private int _threshold;
    private int _lowStep;

    /// <param name="initial">The window the peer starts with (SETTINGS_INITIAL_WINDOW_SIZE, or the connection's).</param>
    /// <param name="lowStep">Smaller step used while the window is below half (0: none, for streams).</param>
    public ReceiveWindow(int initial, int lowStep = 0)
    {
        _available = initial;
        _threshold = Math.Max(1, initial / 2);
        _lowStep = lowStep;
    }

    /// <summary>What the peer may still send.</summary>
    public int Available => Volatile.Read(ref _available);

    /// <summary>The read loop accepted a frame of <paramref name="length"/> flow-controlled octets (it checked <see cref="Available"/> first).</summary>
    public void Debit(int length) => Interlocked.Add(ref _available, -length);

    /// <summary>
    /// <paramref name="bytes"/> were consumed. Returns the increment to announce in a WINDOW_UPDATE now, or 0 while the step
    /// is not reached. The window is raised before returning, so the peer can never send beyond what the read loop allows.
    /// </summary>
    public int Return(int bytes)
    {
        if (bytes <= 0)
        {
            return 0;
        }
        var pending = Interlocked.Add(ref _pending, bytes);
        if (pending >= _threshold || (_lowStep > 0 && pending >= _lowStep && Volatile.Read(ref _available) < _threshold))
        {
            var increment = Interlocked.Exchange(ref _pending, 0);
            if (increment > 0)
            {
                Interlocked.Add(ref _available, increment);
                return increment;
            }
        }
        return 0;
    }

    /// <summary>A pooled stream's next life starts from the initial window again (nobody else touches it then).</summary>
    public void Reset(int initial)
    {
        _available = initial;
        _pending = 0;
    }
}
