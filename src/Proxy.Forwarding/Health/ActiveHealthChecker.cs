using System.Runtime.CompilerServices;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding.Health;

/// <summary>
/// Active health checks: every cluster with <c>HealthCheck:Active:Enabled</c> is probed at its
/// interval with <c>GET {Health ?? Address}{Path}</c>. The one policy, ConsecutiveFailures: a 2xx marks
/// the destination healthy; it turns unhealthy after <c>ConsecutiveFailuresHealthPolicy.Threshold</c>
/// failures in a row (cluster metadata, default 2).
/// </summary>
// The probe loop is the only writer of ActiveHealth results; readers see each write atomically.
internal sealed class ActiveHealthChecker(ProxyStateManager manager, ILogger<ActiveHealthChecker> logger, TimeProvider time) : BackgroundService
{
    public static readonly TimeSpan DefaultInterval = TimeSpan.FromSeconds(15);
    public static readonly TimeSpan DefaultTimeout = TimeSpan.FromSeconds(10);
    public const int DefaultThreshold = 2;
    public const string ThresholdMetadataKey = "ConsecutiveFailuresHealthPolicy.Threshold";

    // Keyed weakly: a reload replaces changed ClusterStates, and the old ones (with their handlers) must not
    // stay reachable from here.
    private readonly ConditionalWeakTable<ClusterState, StrongBox<long>> _nextProbe = new();

    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        // A short fixed tick; each cluster keeps its own interval. Avoids one timer per cluster
        // and follows reloads without bookkeeping.
        using var timer = new PeriodicTimer(TimeSpan.FromMilliseconds(250), time);
        try
        {
            while (await timer.WaitForNextTickAsync(stoppingToken).ConfigureAwait(false))
            {
                if (!manager.IsInitialized)
                {
                    continue;
                }

                var now = time.GetTimestamp();
                foreach (var cluster in manager.Current.Clusters.Values)
                {
                    if (cluster.Config.HealthCheck?.Active is not { Enabled: true } active)
                    {
                        continue;
                    }

                    var due = _nextProbe.GetOrCreateValue(cluster);
                    if (due.Value != 0 && now < due.Value)
                    {
                        continue;
                    }

                    var interval = active.Interval ?? DefaultInterval;
                    due.Value = now + (long)(interval.TotalSeconds * time.TimestampFrequency);
                    await ProbeClusterAsync(cluster, stoppingToken).ConfigureAwait(false);
                }
            }
        }
        catch (OperationCanceledException) when (stoppingToken.IsCancellationRequested)
        {
        }
    }

    /// <summary>Probes every destination of a cluster once, concurrently, and records the results.</summary>
    public async Task ProbeClusterAsync(ClusterState cluster, CancellationToken cancellationToken)
    {
        var active = cluster.Config.HealthCheck?.Active ?? new ActiveHealthCheckConfig();
        var threshold = cluster.Config.Metadata?.TryGetValue(ThresholdMetadataKey, out var text) == true
            && int.TryParse(text, out var parsed) && parsed > 0 ? parsed : DefaultThreshold;
        await Task.WhenAll(cluster.Destinations.Select(d => ProbeAsync(cluster, d, active, threshold, cancellationToken))).ConfigureAwait(false);
    }

    private async Task ProbeAsync(ClusterState cluster, DestinationState destination, ActiveHealthCheckConfig active, int threshold, CancellationToken cancellationToken)
    {
        var baseAddress = destination.Config.Health ?? destination.Config.Address;
        var uri = new Uri(baseAddress.TrimEnd('/') + "/" + (active.Path ?? "").TrimStart('/') + active.Query);
        bool healthy;
        try
        {
            using var timeout = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
            timeout.CancelAfter(active.Timeout ?? DefaultTimeout);
            using var request = new HttpRequestMessage(HttpMethod.Get, uri)
            {
                Version = cluster.RequestConfig.Version ?? System.Net.HttpVersion.Version20,
                VersionPolicy = cluster.RequestConfig.VersionPolicy ?? HttpVersionPolicy.RequestVersionOrLower,
            };
            if (destination.Config.Host is { } host)
            {
                // The probe asks for the same virtual host the destination's requests do.
                request.Headers.Host = host;
            }

            using var response = await cluster.Invoker.SendAsync(request, timeout.Token).ConfigureAwait(false);
            healthy = response.IsSuccessStatusCode;
        }
        catch (Exception ex) when (!cancellationToken.IsCancellationRequested)
        {
            Log.ProbeFailed(logger, cluster.ClusterId, destination.DestinationId, ex.Message);
            healthy = false;
        }

        if (healthy)
        {
            Volatile.Write(ref destination.ConsecutiveProbeFailures, 0);
            destination.Health = DestinationHealth.Healthy;
        }
        else if (Interlocked.Increment(ref destination.ConsecutiveProbeFailures) >= threshold)
        {
            destination.Health = DestinationHealth.Unhealthy;
        }
    }
}
