namespace Proxy.Forwarding.Health;

/// <summary>The names of the built-in active health check policies (<c>HealthCheck:Active:Policy</c>).</summary>
public static class ActiveHealthCheckPolicies
{
    /// <summary>
    /// Default. A 2xx probe marks the destination healthy; it turns unhealthy after
    /// <c>ConsecutiveFailuresHealthPolicy.Threshold</c> failed probes in a row (cluster metadata, default 2).
    /// </summary>
    public const string ConsecutiveFailures = nameof(ConsecutiveFailures);
}

/// <summary>The names of the built-in passive health check policies (<c>HealthCheck:Passive:Policy</c>).</summary>
public static class PassiveHealthCheckPolicies
{
    /// <summary>
    /// Default (YARP's). Unhealthy for the reactivation period once, within the detection window,
    /// at least <see cref="TransportFailureRateHealthPolicyOptions.MinimalTotalCountThreshold"/> requests
    /// were made and more than the rate limit of them failed at the transport level.
    /// </summary>
    public const string TransportFailureRate = nameof(TransportFailureRate);

    /// <summary>Our extension: unhealthy for the reactivation period after any single transport failure.</summary>
    public const string FirstFailure = nameof(FirstFailure);
}

/// <summary>The names of the built-in availability rules (<c>HealthCheck:AvailableDestinationsPolicy</c>).</summary>
public static class AvailableDestinationsPolicies
{
    /// <summary>Default. Healthy and not-yet-known destinations; none available = 503.</summary>
    public const string HealthyAndUnknown = nameof(HealthyAndUnknown);

    /// <summary>As <see cref="HealthyAndUnknown"/>, but every destination when none is available (panic mode).</summary>
    public const string HealthyOrPanic = nameof(HealthyOrPanic);
}

/// <summary>
/// Process-wide settings of the TransportFailureRate passive policy (YARP's shape). Configure with
/// <c>services.Configure&lt;TransportFailureRateHealthPolicyOptions&gt;(...)</c>; a cluster overrides the
/// rate limit with the metadata key <c>TransportFailureRateHealthPolicy.RateLimit</c>.
/// </summary>
public sealed class TransportFailureRateHealthPolicyOptions
{
    /// <summary>The cluster metadata key that overrides <see cref="DefaultFailureRateLimit"/>.</summary>
    public const string RateLimitMetadataKey = "TransportFailureRateHealthPolicy.RateLimit";

    /// <summary>How far back requests are counted. Default 60 s.</summary>
    public TimeSpan DetectionWindowSize { get; set; } = TimeSpan.FromSeconds(60);

    /// <summary>Fewer requests than this in the window never make a destination unhealthy. Default 10.</summary>
    public int MinimalTotalCountThreshold { get; set; } = 10;

    /// <summary>Failures / total above this makes the destination unhealthy. Default 0.3.</summary>
    public double DefaultFailureRateLimit { get; set; } = 0.3;
}
