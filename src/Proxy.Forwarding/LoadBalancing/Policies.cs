using System.Runtime.CompilerServices;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.LoadBalancing;

/// <summary>Two random picks, keep the less loaded: near-least-requests without herding.</summary>
internal sealed class PowerOfTwoChoicesPolicy : ILoadBalancingPolicy
{
    public string Name => LoadBalancingPolicies.PowerOfTwoChoices;

    public DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available)
    {
        if (available.Count == 1)
        {
            return available[0];
        }

        var first = Random.Shared.Next(available.Count);
        // Draw the second from the others so the two choices are always distinct.
        var second = (first + 1 + Random.Shared.Next(available.Count - 1)) % available.Count;
        var a = available[first];
        var b = available[second];
        return a.ConcurrentRequestCount <= b.ConcurrentRequestCount ? a : b;
    }
}

/// <summary>Takes turns; the counter lives per cluster state so reloads start fresh.</summary>
internal sealed class RoundRobinPolicy : ILoadBalancingPolicy
{
    // Owned by the cluster it is attached to; only touched with Interlocked.
    private sealed class Counter
    {
        public int Value = -1;
    }

    private readonly ConditionalWeakTable<ClusterState, Counter> _counters = new();

    public string Name => LoadBalancingPolicies.RoundRobin;

    public DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available)
    {
        var counter = _counters.GetValue(cluster, _ => new Counter());
        var next = (uint)Interlocked.Increment(ref counter.Value);
        return available[(int)(next % (uint)available.Count)];
    }
}

/// <summary>Uniformly at random.</summary>
internal sealed class RandomPolicy : ILoadBalancingPolicy
{
    public string Name => LoadBalancingPolicies.Random;

    public DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available) =>
        available[Random.Shared.Next(available.Count)];
}

/// <summary>The fewest requests in flight; ties go to the first by name.</summary>
internal sealed class LeastRequestsPolicy : ILoadBalancingPolicy
{
    public string Name => LoadBalancingPolicies.LeastRequests;

    public DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available)
    {
        var best = available[0];
        for (var i = 1; i < available.Count; i++)
        {
            if (available[i].ConcurrentRequestCount < best.ConcurrentRequestCount)
            {
                best = available[i];
            }
        }

        return best;
    }
}

/// <summary>The first available by name: active/standby.</summary>
internal sealed class FirstAlphabeticalPolicy : ILoadBalancingPolicy
{
    public string Name => LoadBalancingPolicies.FirstAlphabetical;

    public DestinationState? PickDestination(HttpContext context, ClusterState cluster, IReadOnlyList<DestinationState> available)
    {
        var best = available[0];
        for (var i = 1; i < available.Count; i++)
        {
            if (string.Compare(available[i].DestinationId, best.DestinationId, StringComparison.OrdinalIgnoreCase) < 0)
            {
                best = available[i];
            }
        }

        return best;
    }
}
