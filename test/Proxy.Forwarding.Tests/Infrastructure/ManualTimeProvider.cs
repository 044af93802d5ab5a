namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>
/// A clock that moves only when the test says so, for code that reads timestamps but sets no
/// timers (passive health). Timers are deliberately unsupported: Proxy.Testing's FakeTimeProvider
/// does that, but this project stays free of the server's assemblies.
/// </summary>
// Owned by the test; reads may come from request threads, hence Interlocked.
public sealed class ManualTimeProvider : TimeProvider
{
    private long _ticks = TimeSpan.FromDays(1).Ticks;

    public override long TimestampFrequency => TimeSpan.TicksPerSecond;

    public override long GetTimestamp() => Interlocked.Read(ref _ticks);

    public override DateTimeOffset GetUtcNow() => new DateTimeOffset(2025, 1, 1, 0, 0, 0, TimeSpan.Zero).AddTicks(GetTimestamp());

    public override ITimer CreateTimer(TimerCallback callback, object? state, TimeSpan dueTime, TimeSpan period) =>
        throw new NotSupportedException("ManualTimeProvider has no timers.");

    public void Advance(TimeSpan delta) => Interlocked.Add(ref _ticks, delta.Ticks);
}
