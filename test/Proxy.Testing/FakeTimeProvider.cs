namespace Proxy.Testing;

/// <summary>
/// A manually driven <see cref="TimeProvider"/> for tests (Microsoft.Extensions.TimeProvider.Testing is
/// not on our package mirror). Time only moves when a test calls <see cref="AdvanceBy"/> or
/// <see cref="SetUtcNow"/>; due timers then fire in due-time order (ties in creation order), on the
/// calling thread, with the clock set to each timer's due time while its callback runs. Timers
/// created or changed by a callback take part in the same advance if they fall due within it.
/// Works with <c>Task.Delay(TimeSpan, TimeProvider)</c> and <c>new CancellationTokenSource(TimeSpan, TimeProvider)</c>.
/// </summary>
// Owned by the test: Advance calls may come from any thread but are serialised by a lock.
public sealed class FakeTimeProvider : TimeProvider
{
    private readonly object _gate = new();
    private readonly List<FakeTimer> _timers = new();
    private readonly object _advanceGate = new();
    private DateTimeOffset _now;
    private long _nextSequence;

    public FakeTimeProvider() : this(new DateTimeOffset(2025, 1, 1, 0, 0, 0, TimeSpan.Zero)) { }

    public FakeTimeProvider(DateTimeOffset start) => _now = start;

    public override TimeZoneInfo LocalTimeZone => TimeZoneInfo.Utc;

    /// <summary>One tick per 100 ns, like <see cref="TimeSpan"/>, so timestamps are exact.</summary>
    public override long TimestampFrequency => TimeSpan.TicksPerSecond;

    public override DateTimeOffset GetUtcNow()
    {
        lock (_gate)
        {
            return _now;
        }
    }

    public override long GetTimestamp() => GetUtcNow().UtcTicks;

    /// <summary>Number of timers currently armed (due time set, not disposed). Handy for asserting a timeout was cancelled.</summary>
    public int ActiveTimerCount
    {
        get
        {
            lock (_gate)
            {
                return _timers.Count(t => t.DueAt is not null);
            }
        }
    }

    public override ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period)
    {
        ArgumentNullException.ThrowIfNull(callback);
        var timer = new FakeTimer(this, callback, state);
        lock (_gate)
        {
            _timers.Add(timer);
        }
        timer.Change(dueTime, period);
        return timer;
    }

    /// <summary>Moves the clock forward by <paramref name="delta"/>, firing every timer that falls due, in order.</summary>
    public void AdvanceBy(TimeSpan delta)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(delta, TimeSpan.Zero);
        lock (_advanceGate)
        {
            DateTimeOffset target;
            lock (_gate)
            {
                target = _now + delta;
            }
            RunUntil(target);
        }
    }

    /// <summary>Sets the clock to <paramref name="value"/> (not backwards), firing due timers in order.</summary>
    public void SetUtcNow(DateTimeOffset value)
    {
        lock (_advanceGate)
        {
            lock (_gate)
            {
                if (value < _now)
                {
                    throw new ArgumentOutOfRangeException(nameof(value), "Time cannot go backwards.");
                }
            }
            RunUntil(value);
        }
    }

    private void RunUntil(DateTimeOffset target)
    {
        while (true)
        {
            FakeTimer? next = null;
            lock (_gate)
            {
                foreach (var timer in _timers)
                {
                    if (timer.DueAt is { } due && due <= target &&
                        (next is null || due < next.DueAt || (due == next.DueAt && timer.Sequence < next.Sequence)))
                    {
                        next = timer;
                    }
                }
                if (next is null)
                {
                    _now = target;
                    return;
                }
                _now = next.DueAt!.Value;
                // Re-arm periodic timers before the callback so a callback that calls Change wins.
                next.DueAt = next.Period > TimeSpan.Zero ? _now + next.Period : null;
                next.Sequence = _nextSequence++;
            }
            next.Fire();
        }
    }

    private void Change(FakeTimer timer, TimeSpan dueTime, TimeSpan period)
    {
        lock (_gate)
        {
            if (timer.Disposed)
            {
                return;
            }
            timer.Period = period == Timeout.InfiniteTimeSpan ? TimeSpan.Zero : period;
            timer.DueAt = dueTime == Timeout.InfiniteTimeSpan ? null : _now + (dueTime < TimeSpan.Zero ? TimeSpan.Zero : dueTime);
            timer.Sequence = _nextSequence++;
        }
    }

    private void Remove(FakeTimer timer)
    {
        lock (_gate)
        {
            timer.Disposed = true;
            timer.DueAt = null;
            _timers.Remove(timer);
        }
    }

    // Owned by FakeTimeProvider: its mutable fields are only touched under the provider's lock.
    private sealed class FakeTimer : ITimer
    {
        private readonly FakeTimeProvider _owner;
        private readonly TimerCallback _callback;
        private readonly object? _state;

        public FakeTimer(FakeTimeProvider owner, TimerCallback callback, object? state)
        {
            _owner = owner;
            _callback = callback;
            _state = state;
        }

        public DateTimeOffset? DueAt { get; set; }
        public TimeSpan Period { get; set; }
        public long Sequence { get; set; }
        public bool Disposed { get; set; }

        public void Fire() => _callback(_state);

        public bool Change(TimeSpan dueTime, TimeSpan period)
        {
            if (Disposed)
            {
                return false;
            }
            _owner.Change(this, dueTime, period);
            return true;
        }

        public void Dispose() => _owner.Remove(this);

        public ValueTask DisposeAsync()
        {
            Dispose();
            return ValueTask.CompletedTask;
        }
    }
}
