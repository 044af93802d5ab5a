using Microsoft.Extensions.Time.Testing;

namespace Proxy.Testing;

/// <summary>
/// Microsoft.Extensions.TimeProvider.Testing's <see cref="FakeTimeProvider"/> (time moves only on Advance/SetUtcNow,
/// due timers fire there in due order with the clock at each one's due time) that also counts the timers currently
/// armed, so a test can wait until the engine armed the timeout it is about to run into instead of racing it.
/// </summary>
// Owned by the test; timers are created and changed from the engine's threads, hence the lock.
public sealed class TimerCountingTimeProvider : FakeTimeProvider
{
    private readonly object _gate = new();
    private int _armed;

    /// <summary>Timers with a due time set, not fired (one-shot) and not disposed.</summary>
    public int ActiveTimerCount
    {
        get
        {
            lock (_gate)
            {
                return _armed;
            }
        }
    }

    public override ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period)
    {
        ArgumentNullException.ThrowIfNull(callback);
        var counted = new CountedTimer(this, callback, state);
        counted.Inner = base.CreateTimer(static s => ((CountedTimer)s!).Fire(), counted, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        counted.Change(dueTime, period);
        return counted;
    }

    // Owned by TimerCountingTimeProvider: its state changes under the provider's lock.
    private sealed class CountedTimer(TimerCountingTimeProvider owner, TimerCallback callback, object? state) : ITimer
    {
        private bool _armed;
        private bool _periodic;
        private bool _disposed;

        public ITimer Inner { get; set; } = null!;

        public bool Change(TimeSpan dueTime, TimeSpan period)
        {
            lock (owner._gate)
            {
                if (_disposed)
                {
                    return false;
                }

                SetArmed(dueTime != Timeout.InfiniteTimeSpan);
                _periodic = period != Timeout.InfiniteTimeSpan && period != TimeSpan.Zero;
            }

            return Inner.Change(dueTime, period);
        }

        public void Fire()
        {
            lock (owner._gate)
            {
                if (!_periodic)
                {
                    SetArmed(false); // a one-shot timer is spent once it fired (its callback may arm it again)
                }
            }

            callback(state);
        }

        public void Dispose()
        {
            lock (owner._gate)
            {
                _disposed = true;
                SetArmed(false);
            }

            Inner.Dispose();
        }

        public ValueTask DisposeAsync()
        {
            Dispose();
            return ValueTask.CompletedTask;
        }

        private void SetArmed(bool armed)
        {
            if (armed != _armed)
            {
                _armed = armed;
                owner._armed += armed ? 1 : -1;
            }
        }
    }
}
