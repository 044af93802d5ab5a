namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The cancellation of one forwarded exchange: the client's abort, an activity timeout that every
/// read and write pushes back, and an optional fixed deadline. Remembers which one fired so the
/// outcome can be classified (504 vs client gone).
/// </summary>
/// <remarks>
/// NOTE: only what is configured costs anything. A gRPC call without a deadline (no activity timeout by default)
/// uses the client's token as it is: no token source, no timer, no linked registration per call.
/// </remarks>
// Owned by one forwarded request; the copy loops only call ResetActivity.
internal sealed class ForwardingCancellation : IDisposable
{
    private readonly CancellationToken _clientAborted;
    private readonly CancellationTokenSource? _activity;
    private readonly CancellationTokenSource? _deadline;
    private readonly CancellationTokenSource? _linked;
    private TimeSpan _activityTimeout;

    public ForwardingCancellation(CancellationToken clientAborted, TimeSpan activityTimeout, TimeSpan? deadline)
    {
        _clientAborted = clientAborted;
        _activityTimeout = activityTimeout;
        _activity = IsFinite(activityTimeout) ? new CancellationTokenSource() : null;
        _deadline = deadline is { } d ? new CancellationTokenSource(d) : null;
        _linked = (_activity, _deadline) switch
        {
            (null, null) => null,
            ({ } a, null) => CancellationTokenSource.CreateLinkedTokenSource(clientAborted, a.Token),
            (null, { } l) => CancellationTokenSource.CreateLinkedTokenSource(clientAborted, l.Token),
            ({ } a, { } l) => CancellationTokenSource.CreateLinkedTokenSource(clientAborted, a.Token, l.Token),
        };
        ResetActivity();
    }

    public CancellationToken Token => _linked?.Token ?? _clientAborted;

    public bool ClientAborted => _clientAborted.IsCancellationRequested;

    public bool DeadlineExpired => _deadline?.IsCancellationRequested == true;

    public bool TimedOut => !ClientAborted && (DeadlineExpired || _activity?.IsCancellationRequested == true);

    /// <summary>Called after every read and write: the exchange made progress.</summary>
    public void ResetActivity()
    {
        if (_activity is not null && IsFinite(_activityTimeout))
        {
            _activity.CancelAfter(_activityTimeout);
        }
    }

    /// <summary>
    /// Changes the activity timeout (e.g. off once a response turns out to be SSE). A timeout can only be changed
    /// or turned off here, not turned on: an exchange created without one has no timer to arm.
    /// </summary>
    public void SetActivityTimeout(TimeSpan timeout)
    {
        _activityTimeout = timeout;
        if (_activity is null)
        {
            return;
        }

        if (!IsFinite(timeout))
        {
            _activity.CancelAfter(System.Threading.Timeout.InfiniteTimeSpan);
        }
        else
        {
            ResetActivity();
        }
    }

    private static bool IsFinite(TimeSpan timeout) => timeout > TimeSpan.Zero && timeout != System.Threading.Timeout.InfiniteTimeSpan;

    public void Dispose()
    {
        _linked?.Dispose();
        _activity?.Dispose();
        _deadline?.Dispose();
    }
}
