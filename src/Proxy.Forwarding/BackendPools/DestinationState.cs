using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Health;

namespace Proxy.Forwarding.BackendPools;

/// <summary>What we know about a destination's health.</summary>
public enum DestinationHealth
{
    /// <summary>Not probed: treated as available.</summary>
    Unknown,
    /// <summary>Probed and healthy.</summary>
    Healthy,
    /// <summary>Probed or observed failing: not available (except in HealthyOrPanic's panic mode).</summary>
    Unhealthy,
}

/// <summary>The runtime state of one destination: its config, load and health.</summary>
// Shared by all requests: counters change only through Interlocked (the passive window has its own
// lock); the config is immutable.
public sealed class DestinationState
{
    private readonly TimeProvider _time;
    private int _concurrentRequests;
    private long _passiveUnhealthyUntil = long.MinValue;
    private volatile DestinationHealth _activeHealth;

    internal DestinationState(string destinationId, DestinationConfig config, AdmissionGate gate, TimeProvider? time = null)
    {
        DestinationId = destinationId;
        Config = config;
        Gate = gate;
        _time = time ?? TimeProvider.System;
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
        get => IsPassivelyUnhealthy ? DestinationHealth.Unhealthy : _activeHealth;
        set => _activeHealth = value;
    }

    /// <summary>Consecutive failed active probes (reset by a successful one).</summary>
    internal int ConsecutiveProbeFailures;

    /// <summary>True while a passive failure is being sat out; false again once the reactivation period is over.</summary>
    // NOTE: asked on every request (AvailableDestinations): a destination never marked, or whose period is over, answers
    // without reading the clock; a period seen over is cleared (unless a new failure marked it meanwhile).
    internal bool IsPassivelyUnhealthy
    {
        get
        {
            var until = Volatile.Read(ref _passiveUnhealthyUntil);
            if (until == long.MinValue)
            {
                return false;
            }
            if (_time.GetTimestamp() < until)
            {
                return true;
            }
            Interlocked.CompareExchange(ref _passiveUnhealthyUntil, long.MinValue, until);
            return false;
        }
    }

    /// <summary>Requests and transport failures over the passive detection window.</summary>
    internal FailureRateWindow PassiveWindow { get; } = new();

    /// <summary>Passive health: traffic to this destination failed; skip it for <paramref name="period"/>.</summary>
    internal void MarkPassiveFailure(TimeSpan period) =>
        Volatile.Write(ref _passiveUnhealthyUntil, _time.GetTimestamp() + (long)(period.TotalSeconds * _time.TimestampFrequency));

    internal AdmissionGate Gate { get; }

    /// <summary>Requests waiting for an admission slot to this destination (always 0 without MaxConcurrentRequestsPerDestination).</summary>
    public int QueuedRequestCount => Gate.QueueLength;

    /// <summary>The destination's instruments, made on its first request (a benign race may make two; either is right).</summary>
    internal Telemetry.DestinationMetrics? Metrics { get; set; }

    internal void RequestStarted() => Interlocked.Increment(ref _concurrentRequests);

    internal void RequestEnded() => Interlocked.Decrement(ref _concurrentRequests);
}
