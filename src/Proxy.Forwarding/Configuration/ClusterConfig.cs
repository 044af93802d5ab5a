namespace Proxy.Forwarding.Configuration;

/// <summary>A group of equivalent destinations and how to reach them (YARP's <c>Clusters:{name}</c>).</summary>
public sealed record ClusterConfig
{
    /// <summary>The cluster's unique name (the key under <c>Clusters</c>).</summary>
    public string ClusterId { get; init; } = "";

    /// <summary>One of <see cref="LoadBalancingPolicies"/>; null = PowerOfTwoChoices.</summary>
    public string? LoadBalancingPolicy { get; init; }

    /// <summary>The destinations by name.</summary>
    public IReadOnlyDictionary<string, DestinationConfig>? Destinations { get; init; }

    /// <summary>The backend connection pool settings.</summary>
    public HttpClientConfig? HttpClient { get; init; }

    /// <summary>
    /// Which client carries this cluster's requests (one of <see cref="Forwarder.ForwarderTransports"/>): <c>Native</c>, our
    /// own HTTP/2 and HTTP/1.1 client connections relayed stream to stream, or <c>HttpClient</c> (SocketsHttpHandler).
    /// Null: Native when a native transport is registered as the default (the proxy on Proxy.Server), else HttpClient.
    /// </summary>
    public string? Transport { get; init; }

    /// <summary>Per-request settings for requests to this cluster.</summary>
    public HttpRequestConfig? HttpRequest { get; init; }

    /// <summary>Active probes, passive failure-rate checks and the availability rule.</summary>
    public HealthCheckConfig? HealthCheck { get; init; }

    /// <summary>Keeps a client's requests on the destination that served its first one.</summary>
    public SessionAffinityConfig? SessionAffinity { get; init; }

    /// <summary>Free-form data for extensions.</summary>
    public IReadOnlyDictionary<string, string>? Metadata { get; init; }
}

/// <summary>One backend.</summary>
public sealed record DestinationConfig
{
    /// <summary>The backend's base address, e.g. <c>http://10.0.0.5:5000/</c>.</summary>
    public string Address { get; init; } = "";

    /// <summary>An optional different address for health probes.</summary>
    public string? Health { get; init; }

    /// <summary>
    /// The Host (HTTP/1.1) or :authority (HTTP/2) sent to this destination, requests and active probes alike, instead of
    /// the address's authority; a transform that sets Host (or RequestHeaderOriginalHost) still wins, as on YARP.
    /// </summary>
    public string? Host { get; init; }

    /// <summary>Free-form data for extensions.</summary>
    public IReadOnlyDictionary<string, string>? Metadata { get; init; }
}

/// <summary>
/// The backend pool: SocketsHttpHandler settings plus our own bounded admission per destination.
/// Defaults suit many long-lived HTTP/2 streams (SSE, gRPC).
/// </summary>
public sealed record HttpClientConfig
{
    /// <summary>Upper bound on connections per destination (null = unlimited).</summary>
    public int? MaxConnectionsPerServer { get; init; }

    /// <summary>
    /// Open more HTTP/2 connections when one reaches the server's stream limit. Default true:
    /// a single connection caps at ~100 concurrent streams (YARP measured -65% without it).
    /// </summary>
    public bool? EnableMultipleHttp2Connections { get; init; }

    /// <summary>How long a pooled connection may be reused (null = forever). Helps DNS changes.</summary>
    public TimeSpan? PooledConnectionLifetime { get; init; }

    /// <summary>How long an idle pooled connection is kept. Default 60 s.</summary>
    public TimeSpan? PooledConnectionIdleTimeout { get; init; }

    /// <summary>Time allowed to establish a connection. Default 10 s.</summary>
    public TimeSpan? ConnectTimeout { get; init; }

    /// <summary>Accept any backend certificate (development only).</summary>
    public bool? DangerousAcceptAnyServerCertificate { get; init; }

    /// <summary>
    /// HTTP/2 backends: a PING goes out after this long without a frame from the backend (null = 30 s on the native relay,
    /// off on HttpClient, SocketsHttpHandler's default); <c>-00:00:00.001</c> (infinite) turns it off.
    /// </summary>
    public TimeSpan? KeepAlivePingDelay { get; init; }

    /// <summary>HTTP/2 backends: a PING unanswered this long closes the connection and fails its streams (null = 20 s).</summary>
    public TimeSpan? KeepAlivePingTimeout { get; init; }

    /// <summary>
    /// Our admission gate: at most this many requests in flight per destination (null = unlimited).
    /// </summary>
    public int? MaxConcurrentRequestsPerDestination { get; init; }

    /// <summary>How long a request may wait for an admission slot before a 503. Default 5 s.</summary>
    public TimeSpan? QueueTimeout { get; init; }

    /// <summary>At most this many requests waiting per destination; more get an immediate 503. Default 1024.</summary>
    public int? MaxQueueLength { get; init; }

    /// <summary>TLS versions offered to https destinations (null = the platform's default).</summary>
    public System.Security.Authentication.SslProtocols? SslProtocols { get; init; }

    /// <summary>Encoding of request header values sent to the backend (an <see cref="System.Text.Encoding"/> name, e.g. <c>utf-8</c>; null = ASCII/Latin-1).</summary>
    public string? RequestHeaderEncoding { get; init; }

    /// <summary>Encoding of response header values read from the backend (null = ASCII/Latin-1).</summary>
    public string? ResponseHeaderEncoding { get; init; }

    /// <summary>An outbound HTTP proxy between us and the destinations (HttpClient transport only).</summary>
    public WebProxyConfig? WebProxy { get; init; }
}

/// <summary>YARP's <c>HttpClient:WebProxy</c>: an outbound proxy for backend connections.</summary>
public sealed record WebProxyConfig
{
    /// <summary>The proxy's absolute address (<c>http://proxy:3128</c>).</summary>
    public Uri? Address { get; init; }

    /// <summary>Bypass the proxy for local addresses.</summary>
    public bool? BypassOnLocal { get; init; }

    /// <summary>Send the process's default credentials to the proxy.</summary>
    public bool? UseDefaultCredentials { get; init; }
}

/// <summary>Per-request settings (YARP's <c>HttpRequest</c>).</summary>
public sealed record HttpRequestConfig
{
    /// <summary>
    /// Longest quiet period (no read or write progress) before the exchange is cancelled.
    /// Null = 100 s, except for text/event-stream responses and gRPC calls, which default to no
    /// limit (YARP's 100 s default kills quiet SSE streams: #1764). <see cref="TimeSpan.Zero"/>
    /// disables it everywhere.
    /// </summary>
    public TimeSpan? ActivityTimeout { get; init; }

    /// <summary>The HTTP version to request ("1.1", "2", "2.0"); default 2.</summary>
    public string? Version { get; init; }

    /// <summary>
    /// "RequestVersionOrLower" (default), "RequestVersionOrHigher" or "RequestVersionExact". h2c
    /// backends (http:// addresses) need Version 2 with RequestVersionExact.
    /// </summary>
    public string? VersionPolicy { get; init; }

    /// <summary>Let the hosting server buffer the response to the client (default false: every write is flushed as it comes).</summary>
    public bool? AllowResponseBuffering { get; init; }
}

/// <summary>Health check settings (YARP's shape).</summary>
public sealed record HealthCheckConfig
{
    /// <summary>Active probing.</summary>
    public ActiveHealthCheckConfig? Active { get; init; }

    /// <summary>Passive observation of real traffic.</summary>
    public PassiveHealthCheckConfig? Passive { get; init; }

    /// <summary>
    /// Which destinations may be picked: "HealthyAndUnknown" (default; none available = 503) or
    /// "HealthyOrPanic" (all of them when none is available).
    /// </summary>
    public string? AvailableDestinationsPolicy { get; init; }
}

/// <summary>Active probe settings.</summary>
public sealed record ActiveHealthCheckConfig
{
    /// <summary>Probe at all.</summary>
    public bool? Enabled { get; init; }
    /// <summary>Time between probes.</summary>
    public TimeSpan? Interval { get; init; }
    /// <summary>Probe timeout.</summary>
    public TimeSpan? Timeout { get; init; }
    /// <summary>Policy name: "ConsecutiveFailures" (default and only one).</summary>
    public string? Policy { get; init; }
    /// <summary>Probe path.</summary>
    public string? Path { get; init; }
    /// <summary>Query appended to the probe path, with its leading '?' (<c>?ready=1</c>).</summary>
    public string? Query { get; init; }
}

/// <summary>Passive health settings.</summary>
public sealed record PassiveHealthCheckConfig
{
    /// <summary>Observe at all.</summary>
    public bool? Enabled { get; init; }
    /// <summary>Policy name: "TransportFailureRate" (default) or "FirstFailure".</summary>
    public string? Policy { get; init; }
    /// <summary>How long a failed destination stays unhealthy. Default 60 s.</summary>
    public TimeSpan? ReactivationPeriod { get; init; }
}

/// <summary>A full configuration snapshot: every route and cluster.</summary>
public sealed record ProxyConfig(IReadOnlyList<RouteConfig> Routes, IReadOnlyList<ClusterConfig> Clusters);

/// <summary>The names of the built-in load balancing policies.</summary>
public static class LoadBalancingPolicies
{
    /// <summary>Pick two at random, take the one with fewer requests in flight (default).</summary>
    public const string PowerOfTwoChoices = nameof(PowerOfTwoChoices);
    /// <summary>Take turns.</summary>
    public const string RoundRobin = nameof(RoundRobin);
    /// <summary>Uniformly at random.</summary>
    public const string Random = nameof(Random);
    /// <summary>The destination with the fewest requests in flight.</summary>
    public const string LeastRequests = nameof(LeastRequests);
    /// <summary>The first destination by name (active/standby).</summary>
    public const string FirstAlphabetical = nameof(FirstAlphabetical);
}
