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

    /// <summary>The current health (set by health checks).</summary>
    public DestinationHealth Health { get; set; }

    internal AdmissionGate Gate { get; }

    internal void RequestStarted() => Interlocked.Increment(ref _concurrentRequests);

    internal void RequestEnded() => Interlocked.Decrement(ref _concurrentRequests);
}
