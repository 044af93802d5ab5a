namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The cancellation of one forwarded exchange: the client's abort, an activity timeout that every
/// read and write pushes back, and an optional fixed deadline. Remembers which one fired so the
/// outcome can be classified (504 vs client gone).
/// </summary>
/// <remarks>
/// NOTE: the timers run on the host's <see cref="TimeProvider"/> (DI), like every other timer of the proxy, so a test can
/// move time instead of racing a short wall-clock timeout against a loaded machine.
/// NOTE: only what is configured costs anything. A gRPC call without a deadline (no activity timeout by default)
/// uses the client's token as it is: no token source, no timer, no linked registration per call.
/// </remarks>
// Owned by one forwarded request; the copy loops only call ResetActivity. The timers and the client's and the host's
// tokens cancel from their own threads: each sets its flag, then cancels the one source.
internal sealed class ForwardingCancellation : IDisposable
{
    private readonly CancellationToken _clientAborted;
    private readonly CancellationToken _requestTimeout;
    private readonly TimeProvider _time;
    private readonly bool _deadlineFromClient;
    // NOTE: one source for everything configured, cancelled by the timers and by registrations on the client's (and the
    // host's) token, instead of a source per timer joined by linked sources. An SSE stream keeps its exchange for hours:
    // the linked sources, their registrations and the activity source with its timer came to about 1 KB per stream.
    private CancellationTokenSource? _source;
    private CancellationTokenRegistration _clientRegistration;
    private CancellationTokenRegistration _stoppingRegistration;
    private ITimer? _activityTimer;
    // The exchange started with an activity timeout: it may be turned off (the timer is then released) and on again.
    private bool _activityConfigured;
    private ITimer? _deadlineTimer;
    private volatile bool _activityExpired;
    private volatile bool _deadlineExpired;
    private TimeSpan _activityTimeout;
    // When the exchange last made progress (TimeProvider timestamp). Progress only writes this; the timer, when it comes
    // due, re-arms itself for what is left of the quiet period, so a read or write costs a clock read, not a timer change.
    private long _lastActivity;
    private CancellationToken _stopping;

    /// <param name="clientAborted">The client's RequestAborted.</param>
    /// <param name="activityTimeout">Longest quiet period; infinite or zero for none.</param>
    /// <param name="deadline">Deadline of the whole exchange, if any.</param>
    /// <param name="deadlineFromClient">The deadline is the client's own (a gRPC call's <c>grpc-timeout</c>), not the route's.</param>
    /// <param name="time">The clock of both timers.</param>
    /// <param name="requestTimeout">
    /// The request timeouts middleware's own token (<see cref="RequestTimeoutOf"/>): that middleware cancels RequestAborted
    /// when the route's timeout policy expires, which is a timeout, not a client that left.
    /// </param>
    public ForwardingCancellation(CancellationToken clientAborted, TimeSpan activityTimeout, TimeSpan? deadline, bool deadlineFromClient, TimeProvider time,
        CancellationToken requestTimeout = default)
    {
        _clientAborted = clientAborted;
        _requestTimeout = requestTimeout;
        _time = time;
        _deadlineFromClient = deadline is not null && deadlineFromClient;
        _activityTimeout = activityTimeout;
        if (IsFinite(activityTimeout))
        {
            EnsureSource();
            _activityConfigured = true;
            _lastActivity = time.GetTimestamp();
            _activityTimer = CreateActivityTimer(activityTimeout);
        }
        if (deadline is { } d)
        {
            EnsureSource();
            _deadlineTimer = time.CreateTimer(static state =>
            {
                var self = (ForwardingCancellation)state!;
                self._deadlineExpired = true;
                self.Cancel();
            }, this, d, System.Threading.Timeout.InfiniteTimeSpan);
        }
    }

    /// <summary>Read it after <see cref="EndOnShutdown"/>: a token read before does not see the shutdown.</summary>
    public CancellationToken Token => _source?.Token ?? _clientAborted;

    public bool ClientAborted => _clientAborted.IsCancellationRequested && !_requestTimeout.IsCancellationRequested;

    public bool DeadlineExpired => _deadlineExpired;

    /// <summary>The deadline that expired was the client's own: its call ran out of time, the proxy set no limit of its own.</summary>
    public bool ClientDeadlineExpired => _deadlineFromClient && DeadlineExpired;

    public bool TimedOut => !ClientAborted && (DeadlineExpired || _activityExpired || _requestTimeout.IsCancellationRequested);

    /// <summary>The token of ASP.NET Core's request timeouts middleware when it runs for this request (UseRequestTimeouts), else none.</summary>
    public static CancellationToken RequestTimeoutOf(Microsoft.AspNetCore.Http.HttpContext context) =>
        context.Features.Get<Microsoft.AspNetCore.Http.Timeouts.IHttpRequestTimeoutFeature>()?.RequestTimeoutToken ?? default;

    /// <summary>The host is stopping and <see cref="EndOnShutdown"/> asked for that to end the exchange (nothing else did).</summary>
    public bool ShuttingDown => _stopping.IsCancellationRequested && !ClientAborted && !TimedOut;

    /// <summary>
    /// Cancels <see cref="Token"/> when <paramref name="stopping"/> fires: for an exchange with no natural end (SSE), which
    /// would otherwise hold the host's graceful shutdown until its timeout. Only the first call counts.
    /// </summary>
    public void EndOnShutdown(CancellationToken stopping)
    {
        if (!stopping.CanBeCanceled || _stopping.CanBeCanceled)
        {
            return;
        }

        _stopping = stopping;
        EnsureSource();
        _stoppingRegistration = stopping.UnsafeRegister(static state => ((ForwardingCancellation)state!).Cancel(), this);
    }

    /// <summary>Called after every read and write: the exchange made progress.</summary>
    public void ResetActivity()
    {
        if (_activityTimer is not null)
        {
            Volatile.Write(ref _lastActivity, _time.GetTimestamp());
        }
    }

    /// <summary>
    /// Changes the activity timeout (e.g. off once a response turns out to be SSE). A timeout can only be changed
    /// or turned off here, not turned on: an exchange created without one has no timer to arm.
    /// </summary>
    public void SetActivityTimeout(TimeSpan timeout)
    {
        _activityTimeout = timeout;
        if (!_activityConfigured)
        {
            return;
        }

        if (!IsFinite(timeout))
        {
            // NOTE: released, not just stopped: an SSE stream keeps its exchange for hours, and the timer with its queue
            // entry is about 150 bytes. A copy loop that read the field before this sees a disposed timer (Change is a
            // no-op then).
            var timer = _activityTimer;
            _activityTimer = null;
            timer?.Dispose();
        }
        else
        {
            Volatile.Write(ref _lastActivity, _time.GetTimestamp());
            if (_activityTimer is { } timer)
            {
                timer.Change(timeout, System.Threading.Timeout.InfiniteTimeSpan);
            }
            else
            {
                _activityTimer = CreateActivityTimer(timeout);
            }
        }
    }

    /// <summary>The exchange holds an activity timer now (it is released while the timeout is off).</summary>
    internal bool HasActivityTimer => _activityTimer is not null;

    private ITimer CreateActivityTimer(TimeSpan dueTime) =>
        _time.CreateTimer(static state => ((ForwardingCancellation)state!).OnActivityTimerDue(), this, dueTime, System.Threading.Timeout.InfiniteTimeSpan);

    /// <summary>The quiet period may be over: expire, or wait for what is left of it since the last progress.</summary>
    private void OnActivityTimerDue()
    {
        var timeout = _activityTimeout;
        if (!IsFinite(timeout) || _activityTimer is not { } timer)
        {
            return; // turned off meanwhile
        }

        var quiet = _time.GetElapsedTime(Volatile.Read(ref _lastActivity));
        if (quiet < timeout)
        {
            timer.Change(timeout - quiet, System.Threading.Timeout.InfiniteTimeSpan);
            return;
        }

        _activityExpired = true;
        Cancel();
    }

    private static bool IsFinite(TimeSpan timeout) => timeout > TimeSpan.Zero && timeout != System.Threading.Timeout.InfiniteTimeSpan;

    /// <summary>Creates the one source, cancelled with the client's token (at once when that one already is).</summary>
    private void EnsureSource()
    {
        if (_source is not null)
        {
            return;
        }
        _source = new CancellationTokenSource();
        _clientRegistration = _clientAborted.UnsafeRegister(static state => ((ForwardingCancellation)state!).Cancel(), this);
    }

    private void Cancel()
    {
        try
        {
            _source?.Cancel();
        }
        catch (ObjectDisposedException)
        {
            // The exchange ended and disposed its source while a timer or a token fired: nothing left to cancel.
        }
    }

    public void Dispose()
    {
        _stoppingRegistration.Dispose();
        _clientRegistration.Dispose();
        _activityTimer?.Dispose();
        _deadlineTimer?.Dispose();
        _source?.Dispose();
    }
}
