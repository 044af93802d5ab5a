using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.BackendPools;

namespace Proxy.Forwarding.LoadBalancing;

/// <summary>Chooses one destination among the available ones. Register extra policies in DI.</summary>
public interface ILoadBalancingPolicy
{
    /// <summary>The name used in <c>ClusterConfig.LoadBalancingPolicy</c>.</summary>
    string Name { get; }

    /// <summary>Picks a destination, or null when none should be used. <paramref name="available"/> is never empty.</summary>
    DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available);
}
