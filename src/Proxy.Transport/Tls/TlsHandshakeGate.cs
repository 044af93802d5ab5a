namespace Proxy.Transport.Tls;

/// <summary>
/// Bounds the TLS handshakes a server runs at once; the rest wait their turn, first come first served. Shared by the
/// endpoints of one server (they share its cores).
/// </summary>
/// <remarks>
/// NOTE: why a bound. 10,000 clients connecting in the same second (a restart, every browser's EventSource
/// reconnecting) each started a handshake at once on 2 cores. Every handshake's next step then queued behind every
/// other's, none finished within the 10 s handshake timeout, all the work was thrown away, the clients reconnected and
/// the storm never ended: 54,335 timed-out handshakes against 1,149 finished in a minute. With a bound the first ones
/// finish in a fraction of a second and make room, as nginx (one accept per event-loop turn) and HAProxy
/// (<c>tune.maxaccept</c>) give connections already accepted the turn before new ones.
/// NOTE: a place is held at most <see cref="HoldLimit"/>: a client that sends its ClientHello and then stalls (or a slow
/// network) gives its place back then and its handshake goes on outside the bound, so a few stalled connections a second
/// cannot shut everyone out. The middleware takes a place only once the connection's first bytes are in: an idle TCP
/// connection holds none.
/// </remarks>
// Shared by every connection of the server's TLS endpoints: SemaphoreSlim is the only state (thread-safe, FIFO for
// async waiters); a Place is owned by the handshake that entered, and its hold timer may release it from a timer thread.
public sealed class TlsHandshakeGate
{
    /// <summary>Places per core by default: enough to keep the cores busy while handshakes wait on round trips.</summary>
    public const int DefaultPerCore = 256;

    /// <summary>How long one handshake keeps its place by default.</summary>
    public static readonly TimeSpan DefaultHoldLimit = TimeSpan.FromSeconds(2);

    private readonly SemaphoreSlim _places;
    private readonly TimeProvider _time;

    public TlsHandshakeGate(int maxConcurrent, TimeSpan? holdLimit = null, TimeProvider? time = null)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxConcurrent, 1);
        var hold = holdLimit ?? DefaultHoldLimit;
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(hold, TimeSpan.Zero, nameof(holdLimit));
        MaxConcurrent = maxConcurrent;
        HoldLimit = hold;
        _time = time ?? TimeProvider.System;
        _places = new SemaphoreSlim(maxConcurrent, maxConcurrent);
    }

    /// <summary>The default bound of a server on this machine: <see cref="DefaultPerCore"/> per core.</summary>
    public static int DefaultMaxConcurrent => DefaultPerCore * Environment.ProcessorCount;

    public int MaxConcurrent { get; }

    /// <summary>Longest time a handshake holds its place; after it the handshake continues outside the bound.</summary>
    public TimeSpan HoldLimit { get; }

    /// <summary>Handshakes holding a place now.</summary>
    public int Holding => MaxConcurrent - _places.CurrentCount;

    /// <summary>Waits for a place (first come, first served); dispose the result when the handshake ends.</summary>
    public ValueTask<Place> EnterAsync(CancellationToken cancellationToken)
        => _places.Wait(0) ? ValueTask.FromResult(new Place(this)) : WaitAsync(cancellationToken);

    /// <summary>Handshakes waiting for a place now.</summary>
    public int Waiting => Volatile.Read(ref _waiting);

    private int _waiting;

    private async ValueTask<Place> WaitAsync(CancellationToken cancellationToken)
    {
        Interlocked.Increment(ref _waiting);
        try
        {
            await _places.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            Interlocked.Decrement(ref _waiting);
        }
        return new Place(this);
    }

    /// <summary>One handshake's place: given back when disposed or when <see cref="HoldLimit"/> has passed, whichever is first.</summary>
    // Owned by the handshake; the hold timer may call Release from a timer thread (Release is idempotent).
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

        /// <summary>The place went back (the handshake ended, or it held the place for <see cref="HoldLimit"/>).</summary>
        public bool Released => Volatile.Read(ref _released) == 1;

        public void Dispose() => Release();

        private void Release()
        {
            if (Interlocked.Exchange(ref _released, 1) == 0)
            {
                _hold?.Dispose();
                _gate._places.Release();
            }
        }
    }
}
