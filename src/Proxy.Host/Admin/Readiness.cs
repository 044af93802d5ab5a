using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;

namespace Proxy.Host.Admin;

/// <summary>
/// Admin <c>/readyz</c>: ready when the configuration is loaded, the proxy's listeners are bound (and it is not
/// stopping), and every cluster has at least one destination that is not known to be unhealthy.
/// </summary>
internal static class Readiness
{
    /// <summary>What is not ready, one line each; empty when ready.</summary>
    public static List<string> Check(IServiceProvider proxyServices)
    {
        var reasons = new List<string>();
        var lifetime = proxyServices.GetRequiredService<IHostApplicationLifetime>();
        if (lifetime.ApplicationStopping.IsCancellationRequested)
        {
            reasons.Add("the proxy is stopping");
        }
        else if (!lifetime.ApplicationStarted.IsCancellationRequested
            || proxyServices.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()?.Addresses.Count is null or 0)
        {
            reasons.Add("the proxy's listeners are not bound yet");
        }

        var state = proxyServices.GetRequiredService<IProxyStateLookup>();
        if (!state.IsLoaded)
        {
            reasons.Add("the configuration is not loaded");
            return reasons;
        }

        foreach (var cluster in state.Clusters.OrderBy(c => c.ClusterId, StringComparer.Ordinal))
        {
            if (cluster.Destinations.Count == 0)
            {
                reasons.Add($"cluster '{cluster.ClusterId}' has no destinations");
            }
            else if (cluster.Destinations.All(d => d.Health == DestinationHealth.Unhealthy))
            {
                reasons.Add($"cluster '{cluster.ClusterId}': all {cluster.Destinations.Count} destinations are unhealthy");
            }
        }

        return reasons;
    }
}
