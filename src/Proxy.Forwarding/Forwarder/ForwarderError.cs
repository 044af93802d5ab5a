namespace Proxy.Forwarding.Forwarder;

/// <summary>How a forwarded exchange ended. Outcomes, not exceptions: each maps to a status or a reset.</summary>
public enum ForwarderError
{
    /// <summary>Success.</summary>
    None,
    /// <summary>Connecting to or sending to the backend failed, or its response was invalid (502).</summary>
    Request,
    /// <summary>No response headers before the activity timeout or deadline (504 / DEADLINE_EXCEEDED).</summary>
    RequestTimedOut,
    /// <summary>The client went away before the response headers arrived.</summary>
    RequestCanceled,
    /// <summary>Reading the client's request body failed (400).</summary>
    RequestBodyClient,
    /// <summary>Writing the request body to the backend failed (502).</summary>
    RequestBodyDestination,
    /// <summary>The client went away while the response body was being copied.</summary>
    ResponseBodyCanceled,
    /// <summary>Writing the response body to the client failed.</summary>
    ResponseBodyClient,
    /// <summary>Reading the response body from the backend failed.</summary>
    ResponseBodyDestination,
    /// <summary>The response body went quiet past the activity timeout or passed the deadline.</summary>
    ResponseBodyTimedOut,
    /// <summary>The cluster has no destination to send to (503 / UNAVAILABLE).</summary>
    NoAvailableDestinations,
    /// <summary>No admission slot became free within the queue timeout (503 / UNAVAILABLE).</summary>
    QueueTimeout,
    /// <summary>The admission queue was full (503 / UNAVAILABLE).</summary>
    QueueFull,
    /// <summary>The client's request is malformed (bad target, header name or value) and was not forwarded (400).</summary>
    RequestMalformed,
}

/// <summary>Set on <c>HttpContext.Features</c> when forwarding failed.</summary>
public interface IForwarderErrorFeature
{
    /// <summary>The outcome.</summary>
    ForwarderError Error { get; }

    /// <summary>The exception behind it, if any.</summary>
    Exception? Exception { get; }
}

internal sealed class ForwarderErrorFeature(ForwarderError error, Exception? exception) : IForwarderErrorFeature
{
    public ForwarderError Error { get; } = error;

    public Exception? Exception { get; } = exception;

    /// <summary>The deadline that expired was the client's own (a gRPC call's <c>grpc-timeout</c>): not the destination's fault.</summary>
    public bool ClientDeadlineExpired { get; init; }
}

/// <summary>Which route, cluster and destination a request was forwarded with (set by the proxy endpoints).</summary>
public interface IReverseProxyFeature
{
    /// <summary>The matched route.</summary>
    string RouteId { get; }

    /// <summary>The route's cluster.</summary>
    string ClusterId { get; }

    /// <summary>The chosen destination, once picked.</summary>
    string? DestinationId { get; }
}

internal sealed class ReverseProxyFeature(string routeId, string clusterId) : IReverseProxyFeature
{
    public string RouteId { get; } = routeId;

    public string ClusterId { get; } = clusterId;

    public string? DestinationId { get; set; }

    /// <summary>The chosen destination's configured Host (its <c>Host</c> key), sent unless a transform chose one.</summary>
    public string? DestinationHost { get; set; }
}

/// <summary>Per-request settings for one forwarded exchange (the direct API's knobs).</summary>
public sealed record ForwarderRequestConfig
{
    /// <summary>An empty config: every setting at its default.</summary>
    public static ForwarderRequestConfig Empty { get; } = new();

    /// <summary>
    /// Longest quiet period before the exchange is cancelled. Null = 100 s, except text/event-stream
    /// responses and gRPC calls, which default to none (YARP's 100 s kills quiet SSE: #1764).
    /// <see cref="TimeSpan.Zero"/> disables it.
    /// </summary>
    public TimeSpan? ActivityTimeout { get; init; }

    /// <summary>Deadline for the whole exchange; null = none. A gRPC <c>grpc-timeout</c> can shorten it.</summary>
    public TimeSpan? Timeout { get; init; }

    /// <summary>The HTTP version requested from the backend; null = 2.0.</summary>
    public Version? Version { get; init; }

    /// <summary>The version policy; null = RequestVersionOrLower (h2 via ALPN on https, HTTP/1.1 on http).</summary>
    public HttpVersionPolicy? VersionPolicy { get; init; }

    /// <summary>
    /// True: the hosting server may buffer the response. Null or false: response buffering is disabled, so each SSE event
    /// and gRPC message leaves as it arrives (YARP's default).
    /// </summary>
    public bool? AllowResponseBuffering { get; init; }
}
