using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.BackendPools;

/// <summary>What we know about a destination's health.</summary>
public enum DestinationHealth
{
    /// <summary>Not probed: treated as available.</summary>
    Unknown,
    /// <summary>Probed and healthy.</summary>
    Healthy,
    /// <summary>Probed or observed failing: skipped while others are available.</summary>
    Unhealthy,
}

/// <summary>The runtime state of one destination: its config, load and health.</summary>
// Shared by all requests: counters change only through Interlocked; the config is immutable.
public sealed class DestinationState
{
    private int _concurrentRequests;
    private long _passiveUnhealthyUntil;
    private volatile DestinationHealth _activeHealth;

    internal DestinationState(string destinationId, DestinationConfig config, AdmissionGate gate)
    {
        DestinationId = destinationId;
        Config = config;
        Gate = gate;
    }

    /// <summary>The destination's name.</summary>
    public string DestinationId { get; }

    /// <summary>The destination's configuration.</summary>
    public DestinationConfig Config { get; }

    /// <summary>Requests currently being forwarded to this destination.</summary>
    public int ConcurrentRequestCount => Volatile.Read(ref _concurrentRequests);

    /// <summary>
    /// The effective health: Unhealthy while a passive failure is being sat out, otherwise the
    /// last active probe result. Setting it records an active probe result.
    /// </summary>
    public DestinationHealth Health
    {
        get => Environment.TickCount64 < Volatile.Read(ref _passiveUnhealthyUntil) ? DestinationHealth.Unhealthy : _activeHealth;
        set => _activeHealth = value;
    }

    /// <summary>Consecutive failed active probes (reset by a successful one).</summary>
    internal int ConsecutiveProbeFailures;

    /// <summary>Passive health: traffic to this destination failed; skip it for <paramref name="period"/>.</summary>
    internal void MarkPassiveFailure(TimeSpan period) =>
        Volatile.Write(ref _passiveUnhealthyUntil, Environment.TickCount64 + (long)period.TotalMilliseconds);

    internal AdmissionGate Gate { get; }

    internal void RequestStarted() => Interlocked.Increment(ref _concurrentRequests);

    internal void RequestEnded() => Interlocked.Decrement(ref _concurrentRequests);
}
