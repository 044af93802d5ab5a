using Proxy.Forwarding.BackendPools;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// A read-only view of the configuration in force and its runtime state, for operators' tools (an admin endpoint's
/// readiness check, config dump and dashboard). Resolve it from the services after <c>AddProxyForwarding()</c>.
/// </summary>
public interface IProxyStateLookup
{
    /// <summary>True once <c>MapProxyForwarding()</c> loaded the first valid configuration.</summary>
    bool IsLoaded { get; }

    /// <summary>The routes in force (empty before the first load).</summary>
    IReadOnlyList<RouteConfig> Routes { get; }

    /// <summary>The clusters in force with their destinations' health and load (empty before the first load).</summary>
    IReadOnlyList<ClusterState> Clusters { get; }

    /// <summary>Why the last reload was rejected (the last good configuration stays in force); null after a good one.</summary>
    string? LastReloadError { get; }
}
