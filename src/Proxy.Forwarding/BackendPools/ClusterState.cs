using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.LoadBalancing;

namespace Proxy.Forwarding.BackendPools;

/// <summary>The runtime state of a cluster: its destinations, backend pool and policies.</summary>
// Immutable after construction; replaced as a whole when the cluster's config changes.
public sealed class ClusterState
{
    internal ClusterState(
        ClusterConfig config,
        IReadOnlyList<DestinationState> destinations,
        HttpMessageInvoker invoker,
        ILoadBalancingPolicy loadBalancer,
        ForwarderRequestConfig requestConfig)
    {
        Config = config;
        Destinations = destinations;
        Invoker = invoker;
        LoadBalancer = loadBalancer;
        RequestConfig = requestConfig;
    }

    /// <summary>The cluster's name.</summary>
    public string ClusterId => Config.ClusterId;

    /// <summary>The cluster's configuration.</summary>
    public ClusterConfig Config { get; }

    /// <summary>All destinations, sorted by name.</summary>
    public IReadOnlyList<DestinationState> Destinations { get; }

    internal HttpMessageInvoker Invoker { get; }

    internal ILoadBalancingPolicy LoadBalancer { get; }

    internal ForwarderRequestConfig RequestConfig { get; }

    /// <summary>The native transport of this cluster (our own client connections), or null for HttpClient.</summary>
    internal IForwarderClusterTransport? NativeTransport { get; init; }

    /// <summary>The cluster's session affinity, or null.</summary>
    internal SessionAffinity.SessionAffinityState? Affinity { get; init; }

    /// <summary>Whether the cluster's AvailableDestinationsPolicy is HealthyOrPanic.</summary>
    internal bool PanicWhenNoneAvailable { get; init; }

    /// <summary>
    /// Destinations not known to be unhealthy (healthy or not yet probed). When every one is
    /// unhealthy: all of them under HealthyOrPanic (better a likely failure than a certain 503),
    /// none under HealthyAndUnknown (the caller answers 503).
    /// </summary>
    internal IReadOnlyList<DestinationState> AvailableDestinations()
    {
        var all = Destinations;
        var healthy = 0;
        // Indexed: foreach over the interface boxes the array's enumerator, an allocation per request.
        for (var i = 0; i < all.Count; i++)
        {
            if (all[i].Health != DestinationHealth.Unhealthy)
            {
                healthy++;
            }
        }

        if (healthy == all.Count)
        {
            return all;
        }

        if (healthy == 0)
        {
            return PanicWhenNoneAvailable ? all : [];
        }

        var list = new List<DestinationState>(healthy);
        for (var i = 0; i < all.Count; i++)
        {
            if (all[i].Health != DestinationHealth.Unhealthy)
            {
                list.Add(all[i]);
            }
        }

        return list;
    }
}
