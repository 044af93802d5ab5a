namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The cancellation of one forwarded exchange: the client's abort, an activity timeout that every
/// read and write pushes back, and an optional fixed deadline. Remembers which one fired so the
/// outcome can be classified (504 vs client gone).
/// </summary>
// Owned by one forwarded request; the copy loops only call ResetActivity.
internal sealed class ForwardingCancellation : IDisposable
{
    private readonly CancellationToken _clientAborted;
    private readonly CancellationTokenSource _activity = new();
    private readonly CancellationTokenSource? _deadline;
    private readonly CancellationTokenSource _linked;
    private TimeSpan _activityTimeout;

    public ForwardingCancellation(CancellationToken clientAborted, TimeSpan activityTimeout, TimeSpan? deadline)
    {
        _clientAborted = clientAborted;
        _activityTimeout = activityTimeout;
        _deadline = deadline is { } d ? new CancellationTokenSource(d) : null;
        _linked = _deadline is null
            ? CancellationTokenSource.CreateLinkedTokenSource(clientAborted, _activity.Token)
            : CancellationTokenSource.CreateLinkedTokenSource(clientAborted, _activity.Token, _deadline.Token);
        ResetActivity();
    }

    public CancellationToken Token => _linked.Token;

    public bool ClientAborted => _clientAborted.IsCancellationRequested;

    public bool DeadlineExpired => _deadline?.IsCancellationRequested == true;

    public bool TimedOut => !ClientAborted && (DeadlineExpired || _activity.IsCancellationRequested);

    /// <summary>Called after every read and write: the exchange made progress.</summary>
    public void ResetActivity()
    {
        if (_activityTimeout > TimeSpan.Zero && _activityTimeout != System.Threading.Timeout.InfiniteTimeSpan)
        {
            _activity.CancelAfter(_activityTimeout);
        }
    }

    /// <summary>Changes the activity timeout (e.g. off once a response turns out to be SSE).</summary>
    public void SetActivityTimeout(TimeSpan timeout)
    {
        _activityTimeout = timeout;
        if (timeout <= TimeSpan.Zero || timeout == System.Threading.Timeout.InfiniteTimeSpan)
        {
            _activity.CancelAfter(System.Threading.Timeout.InfiniteTimeSpan);
        }
        else
        {
            ResetActivity();
        }
    }

    public void Dispose()
    {
        _linked.Dispose();
        _activity.Dispose();
        _deadline?.Dispose();
    }
}
