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
    private CancellationToken _clientAborted;
    private CancellationToken _requestTimeout;
    private readonly TimeProvider _time;
    private bool _deadlineFromClient;
    // NOTE: one source for everything configured, cancelled by the timers and by registrations on the client's (and the
    // host's) token, instead of a source per timer joined by linked sources. An SSE stream keeps its exchange for hours:
    // the linked sources, their registrations and the activity source with its timer came to about 1 KB per stream.
    private CancellationTokenSource? _source;
    // The source belongs to this exchange: a pooled object keeps its source (reset) between exchanges, and an exchange that
    // configures nothing uses the client's token as it is.
    private bool _sourceInUse;
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
    // Pooling (Rent): the exchange's generation and phase in one word (generation << 2 | phase), so the activity timer,
    // which may come due for an exchange that already ended, expires only the exchange it was checking.
    private readonly bool _pooled;
    private int _state = PhaseActive;
    private const int PhaseIdle = 0;
    private const int PhaseActive = 1;
    private const int PhaseExpired = 2;
    private const int PhaseMask = 3;
    // NOTE: a thread's own few first, then one shared queue: the direct path rents on the front connection's epoll thread
    // and often ends on another (where the backend's response completed it), so per-thread pools alone only moved objects
    // from one thread to the other (measured: 2 of 7 rents found one).
    private const int MaxPooledPerThread = 8;
    private const int MaxPooledShared = 512;
    [ThreadStatic]
    private static Stack<ForwardingCancellation>? t_pool;
    private static readonly System.Collections.Concurrent.ConcurrentQueue<ForwardingCancellation> s_shared = new();
    private static int s_sharedCount;

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
        : this(time, pooled: false)
    {
        Start(clientAborted, activityTimeout, deadline, deadlineFromClient, requestTimeout);
    }

    private ForwardingCancellation(TimeProvider time, bool pooled)
    {
        _time = time;
        _pooled = pooled;
    }

    /// <summary>
    /// The same as the constructor, from this thread's pool of ended exchanges: their source (reset), its registration list
    /// and the activity timer are reused, so a short request allocates none of them (about 500 bytes, and a timer created
    /// and destroyed, per request). <see cref="Dispose"/> gives it back.
    /// </summary>
    /// <remarks>
    /// NOTE: only for an owner that, before disposing, has awaited everything it gave <see cref="Token"/> to (the native
    /// path awaits its backend call and both pumps): a reset source shows the next exchange's state to whoever still holds
    /// its token. Registrations left on the token are dropped by the reset. An exchange whose source was cancelled, that
    /// expired, or that had a deadline timer (whose callback may still be on its way) is not pooled.
    /// </remarks>
    public static ForwardingCancellation Rent(CancellationToken clientAborted, TimeSpan activityTimeout, TimeSpan? deadline, bool deadlineFromClient,
        TimeProvider time, CancellationToken requestTimeout = default)
    {
        if (!IsFinite(activityTimeout))
        {
            // Nothing to reuse (a gRPC call without deadline has no source or timer; one with a deadline is not pooled):
            // a new object costs less than the pool's queue when the call ends on another thread.
            return new ForwardingCancellation(clientAborted, activityTimeout, deadline, deadlineFromClient, time, requestTimeout);
        }
        ForwardingCancellation? item = null;
        if (t_pool is { Count: > 0 } pool)
        {
            item = pool.Pop();
        }
        else if (Volatile.Read(ref s_sharedCount) > 0 && s_shared.TryDequeue(out item))
        {
            Interlocked.Decrement(ref s_sharedCount);
        }
        if (item is not null && !ReferenceEquals(item._time, time))
        {
            item.DisposeAll(); // another host's clock (tests run several): its timer belongs to that clock
            item = null;
        }
        item ??= new ForwardingCancellation(time, pooled: true);
        item.Start(clientAborted, activityTimeout, deadline, deadlineFromClient, requestTimeout);
        return item;
    }

    private void Start(CancellationToken clientAborted, TimeSpan activityTimeout, TimeSpan? deadline, bool deadlineFromClient, CancellationToken requestTimeout)
    {
        _clientAborted = clientAborted;
        _requestTimeout = requestTimeout;
        _deadlineFromClient = deadline is not null && deadlineFromClient;
        _activityTimeout = activityTimeout;
        _activityExpired = false;
        _deadlineExpired = false;
        _activityConfigured = false;
        var activity = IsFinite(activityTimeout);
        if (activity)
        {
            _lastActivity = _time.GetTimestamp();
        }
        if (_pooled)
        {
            // A new generation, active. A full fence: a timer callback that sees it also sees the timeout and the
            // progress stamp written above.
            Interlocked.Exchange(ref _state, ((_state & ~PhaseMask) + 4) | PhaseActive);
        }
        if (activity)
        {
            EnsureSource();
            _activityConfigured = true;
            if (_activityTimer is { } timer)
            {
                timer.Change(activityTimeout, System.Threading.Timeout.InfiniteTimeSpan);
            }
            else
            {
                _activityTimer = CreateActivityTimer(activityTimeout);
            }
        }
        if (deadline is { } d)
        {
            EnsureSource();
            _deadlineTimer = _time.CreateTimer(static state =>
            {
                var self = (ForwardingCancellation)state!;
                self._deadlineExpired = true;
                self.Cancel();
            }, this, d, System.Threading.Timeout.InfiniteTimeSpan);
        }
    }

    /// <summary>Read it after <see cref="EndOnShutdown"/>: a token read before does not see the shutdown.</summary>
    public CancellationToken Token => _sourceInUse ? _source!.Token : _clientAborted;

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
        // NOTE: a pooled object may hold the timer of an earlier exchange while this one has no activity timeout.
        if (_activityConfigured && _activityTimer is not null)
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
        while (true)
        {
            var state = Volatile.Read(ref _state);
            if ((state & PhaseMask) != PhaseActive)
            {
                return; // a pooled object between exchanges (the next one arms the timer again), or already expired
            }

            var timeout = _activityTimeout;
            if (!IsFinite(timeout) || _activityTimer is not { } timer)
            {
                return; // turned off meanwhile
            }

            var quiet = _time.GetElapsedTime(Volatile.Read(ref _lastActivity));
            if (quiet < timeout)
            {
                timer.Change(timeout - quiet, System.Threading.Timeout.InfiniteTimeSpan);
                if (Volatile.Read(ref _state) == state)
                {
                    return;
                }
                continue; // the exchange ended and the pooled object started another meanwhile: arm for that one
            }

            if (Interlocked.CompareExchange(ref _state, (state & ~PhaseMask) | PhaseExpired, state) != state)
            {
                continue; // it ended (or another began) while this looked: not this exchange's expiry
            }
            _activityExpired = true;
            Cancel();
            return;
        }
    }

    private static bool IsFinite(TimeSpan timeout) => timeout > TimeSpan.Zero && timeout != System.Threading.Timeout.InfiniteTimeSpan;

    /// <summary>Creates the one source, cancelled with the client's token (at once when that one already is).</summary>
    private void EnsureSource()
    {
        if (_sourceInUse)
        {
            return;
        }
        _source ??= new CancellationTokenSource();
        _sourceInUse = true;
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
        if (!_pooled)
        {
            DisposeAll();
            return;
        }

        // Back to this thread's pool when nothing of this exchange can still fire: the registrations' Dispose waits for a
        // callback already running, the activity timer's callback checks the state word, and a deadline timer (no such
        // check) sends its object away. A source that was cancelled cannot be reset.
        _stoppingRegistration.Dispose();
        _clientRegistration.Dispose();
        _stoppingRegistration = default;
        _clientRegistration = default;
        var state = Volatile.Read(ref _state);
        var reusable = (state & PhaseMask) == PhaseActive
            && Interlocked.CompareExchange(ref _state, (state & ~PhaseMask) | PhaseIdle, state) == state
            && _deadlineTimer is null
            && (_source is null || _source.TryReset());
        if (!reusable)
        {
            DisposeAll();
            return;
        }

        // Nothing of the ended request stays reachable from the pool. The activity timer stays armed: when it comes due
        // in the pool it finds no exchange and stops; the next exchange re-arms it (one timer change per request).
        _sourceInUse = false;
        _clientAborted = default;
        _requestTimeout = default;
        _stopping = default;
        var pool = t_pool ??= new Stack<ForwardingCancellation>(MaxPooledPerThread);
        if (pool.Count < MaxPooledPerThread)
        {
            pool.Push(this);
        }
        else if (Interlocked.Increment(ref s_sharedCount) <= MaxPooledShared)
        {
            s_shared.Enqueue(this);
        }
        else
        {
            Interlocked.Decrement(ref s_sharedCount);
            DisposeAll();
        }
    }

    private void DisposeAll()
    {
        _stoppingRegistration.Dispose();
        _clientRegistration.Dispose();
        _activityTimer?.Dispose();
        _deadlineTimer?.Dispose();
        _source?.Dispose();
    }
}
