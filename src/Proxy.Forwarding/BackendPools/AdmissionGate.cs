namespace Proxy.Forwarding.BackendPools;

/// <summary>The outcome of waiting for an admission slot.</summary>
internal enum AdmissionResult
{
    Admitted,
    QueueFull,
    TimedOut,
}

/// <summary>What the gate reports about requests that had to wait (the destination's queue metrics).</summary>
internal interface IAdmissionObserver
{
    /// <summary>A request joined the queue; returns a timestamp handed back to <see cref="Dequeued"/>.</summary>
    long Queued();

    /// <summary>The request left the queue (admitted, timed out or cancelled).</summary>
    void Dequeued(long queuedTimestamp);
}

/// <summary>
/// Bounded admission to one destination: at most N requests in flight, at most M waiting, and a
/// wait that ends in a clear 503 rather than a silent hang (mod_proxy's lesson: a pool that does
/// not match the backend's capacity must fail fast and visibly).
/// </summary>
// Shared by all requests to one destination: the semaphore and Interlocked counters are the only state.
internal sealed class AdmissionGate
{
    private readonly SemaphoreSlim? _slots;
    private readonly int _maxQueueLength;
    private int _queued;

    public AdmissionGate(int? maxConcurrent, TimeSpan queueTimeout, int maxQueueLength)
    {
        _slots = maxConcurrent is { } max ? new SemaphoreSlim(max, max) : null;
        QueueTimeout = queueTimeout;
        _maxQueueLength = maxQueueLength;
    }

    public static AdmissionGate Unbounded { get; } = new(null, TimeSpan.Zero, 0);

    public TimeSpan QueueTimeout { get; }

    public bool IsBounded => _slots is not null;

    /// <summary>Requests currently waiting for a slot.</summary>
    public int QueueLength => Volatile.Read(ref _queued);

    /// <summary>
    /// Waits for a slot. Throws <see cref="OperationCanceledException"/> when the client goes away.
    /// When this returns <see cref="AdmissionResult.Admitted"/> the caller must call <see cref="Release"/>.
    /// </summary>
    public async ValueTask<AdmissionResult> AcquireAsync(IAdmissionObserver? observer, CancellationToken cancellationToken)
    {
        if (_slots is null)
        {
            return AdmissionResult.Admitted;
        }

        if (_slots.Wait(0, CancellationToken.None))
        {
            return AdmissionResult.Admitted;
        }

        if (Interlocked.Increment(ref _queued) > _maxQueueLength)
        {
            Interlocked.Decrement(ref _queued);
            return AdmissionResult.QueueFull;
        }

        var queuedAt = observer?.Queued() ?? 0;
        try
        {
            return await _slots.WaitAsync(QueueTimeout, cancellationToken).ConfigureAwait(false)
                ? AdmissionResult.Admitted
                : AdmissionResult.TimedOut;
        }
        finally
        {
            Interlocked.Decrement(ref _queued);
            observer?.Dequeued(queuedAt);
        }
    }

    /// <summary>A slot now, or false (no waiting, no queueing): the caller then goes through <see cref="AcquireAsync"/>. True: call <see cref="Release"/>.</summary>
    public bool TryAcquire() => _slots is null || _slots.Wait(0, CancellationToken.None);

    public void Release() => _slots?.Release();
}
