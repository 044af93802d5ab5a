using System.Globalization;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding.Health;

/// <summary>
/// Passive health: watches the outcome of every forwarded request and sits a destination out
/// for the reactivation period when its policy says so. Called by the endpoint handler after
/// each request; needs no timer, because <see cref="DestinationState.Health"/> compares the
/// sit-out deadline with the clock on every read.
/// </summary>
// Stateless and shared: per-destination counts live in DestinationState.PassiveWindow.
internal sealed class PassiveHealthChecker(TimeProvider time, IOptions<TransportFailureRateHealthPolicyOptions> options, ILogger<PassiveHealthChecker> logger)
{
    /// <summary>How long a passively failed destination is skipped when not configured (YARP's value).</summary>
    public static readonly TimeSpan DefaultReactivationPeriod = TimeSpan.FromSeconds(60);

    private readonly TransportFailureRateHealthPolicyOptions _options = options.Value;

    /// <summary>
    /// A failure of the destination or of the path to it. NOTE: client cancellations, malformed
    /// client requests and response bodies that went quiet past the activity timeout are not: an
    /// idle SSE stream timing out says nothing about the backend's health.
    /// </summary>
    public static bool IsTransportFailure(ForwarderError error) => error is
        ForwarderError.Request or ForwarderError.RequestTimedOut or
        ForwarderError.RequestBodyDestination or ForwarderError.ResponseBodyDestination;

    /// <summary>Whether the request was sent to the destination at all (malformed or refused requests were not).</summary>
    public static bool WasSent(ForwarderError error) => error is not
        (ForwarderError.RequestMalformed or ForwarderError.NoAvailableDestinations or ForwarderError.QueueFull or ForwarderError.QueueTimeout);

    /// <summary>
    /// Records a completed request to <paramref name="destination"/> and applies the cluster's passive policy. A timeout
    /// that was the client's own deadline (<paramref name="clientDeadlineExpired"/>) counts as a request, not as a failure.
    /// </summary>
    public void RequestCompleted(ClusterState cluster, DestinationState destination, ForwarderError error, bool clientDeadlineExpired = false)
    {
        if (cluster.Config.HealthCheck?.Passive is not { Enabled: true } passive || !WasSent(error))
        {
            return;
        }

        var failed = IsTransportFailure(error) && !(clientDeadlineExpired && error is ForwarderError.RequestTimedOut);
        var period = passive.ReactivationPeriod ?? DefaultReactivationPeriod;
        if (string.Equals(passive.Policy, PassiveHealthCheckPolicies.FirstFailure, StringComparison.OrdinalIgnoreCase))
        {
            if (failed)
            {
                SitOut(cluster, destination, period, "a transport failure");
            }

            return;
        }

        // TransportFailureRate (the default; the validator rejects unknown names).
        var now = time.GetTimestamp();
        var (total, failures) = destination.PassiveWindow.Record(now, BucketTicks(), failed);
        var limit = RateLimit(cluster);
        if (failed && total >= _options.MinimalTotalCountThreshold && (double)failures / total > limit)
        {
            // NOTE: the window is cleared so that, once reactivated, the destination is judged on
            // fresh traffic instead of being thrown out again by the failures that tripped it.
            destination.PassiveWindow.Reset();
            SitOut(cluster, destination, period,
                string.Create(CultureInfo.InvariantCulture, $"{failures} of {total} requests failed (limit {limit:0.###})"));
        }
    }

    /// <summary>The width of one window bucket in <see cref="TimeProvider"/> timestamp ticks.</summary>
    private long BucketTicks() =>
        Math.Max(1, (long)(_options.DetectionWindowSize.TotalSeconds * time.TimestampFrequency / FailureRateWindow.Buckets));

    /// <summary>The cluster's rate limit: metadata override, else the process-wide default.</summary>
    internal double RateLimit(ClusterState cluster) =>
        cluster.Config.Metadata?.TryGetValue(TransportFailureRateHealthPolicyOptions.RateLimitMetadataKey, out var text) == true
        && TryParseRate(text, out var rate) ? rate : _options.DefaultFailureRateLimit;

    /// <summary>A rate is a number from 0 to 1 in invariant culture.</summary>
    internal static bool TryParseRate(string? text, out double rate) =>
        double.TryParse(text, NumberStyles.Float, CultureInfo.InvariantCulture, out rate) && rate is >= 0 and <= 1;

    private void SitOut(ClusterState cluster, DestinationState destination, TimeSpan period, string reason)
    {
        destination.MarkPassiveFailure(period);
        Log.DestinationSatOut(logger, cluster.ClusterId, destination.DestinationId, reason, period);
    }
}
