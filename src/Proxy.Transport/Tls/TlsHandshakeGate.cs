namespace Proxy.Transport.Tls;

/// <summary>
/// Paces a server's accepts by its TLS handshakes in progress: while <see cref="MaxConcurrent"/> handshakes run, the
/// accept loops of the endpoints that share the gate wait for one to end, so new connections wait in the kernel's accept
/// queue instead of being accepted into a handshake that cannot get the CPU. Shared by the endpoints of one server (they
/// share its cores).
/// </summary>
/// <remarks>
/// NOTE: why pace. 10,000 clients connecting in the same second (a restart, every browser's EventSource reconnecting)
/// were all accepted at once on 2 cores: every handshake's next step queued behind every other's, few finished within
/// the 10 s handshake timeout, the work was thrown away, the clients reconnected and the storm went on (one run: 54,335
/// handshakes timed out against 1,149 finished in a minute). nginx (one accept per event-loop turn) and HAProxy
/// (<c>tune.maxaccept</c>) likewise give connections already accepted their turn before new ones.
/// NOTE: why not a queue after accept. A first version let every connection in and queued the handshakes at the gate:
/// the time in the queue counted in the handshake timeout, and 15,000 connections from h2load lost 3,265 to it where
/// accepting them all lost 377. Waiting in the kernel costs no timeout (the clock starts at accept), and the clients'
/// own SYN retries space out what the accept queue cannot hold.
/// NOTE: a connection counts once its first bytes are in (an idle TCP connection counts for nothing), and for at most
/// <see cref="HoldLimit"/>: a client that sends the start of a ClientHello and stalls (or a slow network) stops counting
/// then and its handshake goes on, so a few stalled connections a second cannot hold the accept loops.
/// </remarks>
// Shared by the handshakes of the server's TLS endpoints (Enter, a Place's release from its handshake or its hold timer)
// and their accept loops (WaitForRoomAsync): all state under _lock.
public sealed class TlsHandshakeGate
{
    /// <summary>Handshakes per core by default: enough to keep the cores busy while handshakes wait on round trips.</summary>
    public const int DefaultPerCore = 256;

    /// <summary>How long one handshake counts by default.</summary>
    public static readonly TimeSpan DefaultHoldLimit = TimeSpan.FromSeconds(2);

    private readonly Lock _lock = new();
    private readonly TimeProvider _time;
    private int _inProgress;
    private int _roomWaiters;
    private TaskCompletionSource? _room;

    public TlsHandshakeGate(int maxConcurrent, TimeSpan? holdLimit = null, TimeProvider? time = null)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxConcurrent, 1);
        var hold = holdLimit ?? DefaultHoldLimit;
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(hold, TimeSpan.Zero, nameof(holdLimit));
        MaxConcurrent = maxConcurrent;
        HoldLimit = hold;
        _time = time ?? TimeProvider.System;
    }

    /// <summary>The default bound of a server on this machine: <see cref="DefaultPerCore"/> per core.</summary>
    public static int DefaultMaxConcurrent => DefaultPerCore * Environment.ProcessorCount;

    public int MaxConcurrent { get; }

    /// <summary>Longest time a handshake counts; after it the handshake continues uncounted.</summary>
    public TimeSpan HoldLimit { get; }

    /// <summary>Handshakes counted now (accepted before the bound was reached may take it past <see cref="MaxConcurrent"/>).</summary>
    public int InProgress
    {
        get
        {
            lock (_lock)
            {
                return _inProgress;
            }
        }
    }

    /// <summary>Accept loops waiting for room now.</summary>
    public int AcceptsWaiting
    {
        get
        {
            lock (_lock)
            {
                return _roomWaiters;
            }
        }
    }

    /// <summary>Counts a handshake that has its first bytes; never waits (the pacing is at accept). Dispose it when the handshake ends.</summary>
    public Place Enter()
    {
        lock (_lock)
        {
            _inProgress++;
        }
        return new Place(this);
    }

    /// <summary>Completes once fewer than <see cref="MaxConcurrent"/> handshakes are in progress: an accept loop's turn to accept.</summary>
    public async ValueTask WaitForRoomAsync(CancellationToken cancellationToken)
    {
        Task room;
        lock (_lock)
        {
            if (_inProgress < MaxConcurrent)
            {
                return;
            }
            _room ??= new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            room = _room.Task;
            _roomWaiters++;
        }

        try
        {
            await room.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            lock (_lock)
            {
                _roomWaiters--;
            }
        }
    }

    private void Exit()
    {
        TaskCompletionSource? wake = null;
        lock (_lock)
        {
            _inProgress--;
            if (_inProgress < MaxConcurrent && _room is { } room)
            {
                wake = room;
                _room = null;
            }
        }
        wake?.TrySetResult();
    }

    /// <summary>One handshake's count: ends when disposed or when <see cref="HoldLimit"/> has passed, whichever is first.</summary>
    // Owned by the handshake; the hold timer may end it from a timer thread (ending is idempotent).
    public sealed class Place : IDisposable
    {
        private readonly TlsHandshakeGate _gate;
        // Null only until the constructor has set it; a hold limit so short that the timer fires first finds it null.
        private readonly ITimer? _hold;
        private int _released;

        internal Place(TlsHandshakeGate gate)
        {
            _gate = gate;
            _hold = gate._time.CreateTimer(static state => ((Place)state!).Release(), this, gate.HoldLimit, Timeout.InfiniteTimeSpan);
        }

        /// <summary>The handshake no longer counts (it ended, or it counted for <see cref="HoldLimit"/>).</summary>
        public bool Released => Volatile.Read(ref _released) == 1;

        public void Dispose() => Release();

        private void Release()
        {
            if (Interlocked.Exchange(ref _released, 1) == 0)
            {
                _hold?.Dispose();
                _gate.Exit();
            }
        }
    }
}
