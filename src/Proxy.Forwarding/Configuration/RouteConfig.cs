namespace Proxy.Forwarding.Configuration;

/// <summary>
/// A route: which requests it matches and the cluster they go to. Mirrors YARP's
/// <c>ReverseProxy:Routes:{name}</c> JSON shape so an existing YARP config binds unchanged.
/// </summary>
public sealed record RouteConfig
{
    /// <summary>The route's unique name (the key under <c>Routes</c>).</summary>
    public string RouteId { get; init; } = "";

    /// <summary>The request matching rules.</summary>
    public RouteMatch Match { get; init; } = new();

    /// <summary>Lower orders are tried first; ties are broken by route specificity.</summary>
    public int? Order { get; init; }

    /// <summary>The cluster matching requests are forwarded to.</summary>
    public string? ClusterId { get; init; }

    /// <summary>
    /// Total time allowed for the whole exchange (headers and body). Null = no deadline, which is
    /// what long-lived SSE and gRPC streams need. The forwarder enforces it itself; it is also put on the endpoint as
    /// request timeout metadata, so ASP.NET Core's request timeouts middleware (UseRequestTimeouts) applies it too.
    /// </summary>
    public TimeSpan? Timeout { get; init; }

    /// <summary>Overrides the cluster's <see cref="HttpRequestConfig.ActivityTimeout"/> for this route.</summary>
    public TimeSpan? ActivityTimeout { get; init; }

    /// <summary>
    /// An authorization policy the app registered (AddAuthorization), <c>default</c> for the default policy, or
    /// <c>anonymous</c> to allow anonymous access even under a fallback policy. Null = the app's fallback, if any.
    /// </summary>
    public string? AuthorizationPolicy { get; init; }

    /// <summary>A CORS policy the app registered (AddCors), <c>default</c> for its default policy, or <c>disable</c>.</summary>
    public string? CorsPolicy { get; init; }

    /// <summary>
    /// A rate limiter policy the app registered (AddRateLimiter), <c>default</c> (only the app's global limiter, as with
    /// no value), or <c>disable</c> (not even the global limiter).
    /// </summary>
    public string? RateLimiterPolicy { get; init; }

    /// <summary>An output cache policy the app registered (AddOutputCache).</summary>
    public string? OutputCachePolicy { get; init; }

    /// <summary>
    /// A request timeout policy the app registered (AddRequestTimeouts), or <c>disable</c>. Cannot be combined with
    /// <see cref="Timeout"/>.
    /// </summary>
    public string? TimeoutPolicy { get; init; }

    /// <summary>
    /// The largest request body accepted on this route, in bytes, in place of the server's limit; -1 = no limit.
    /// </summary>
    public long? MaxRequestBodySize { get; init; }

    /// <summary>Transforms in YARP's shape: each one a small string dictionary (<c>{ "PathPrefix": "/api" }</c>).</summary>
    public IReadOnlyList<IReadOnlyDictionary<string, string>>? Transforms { get; init; }

    /// <summary>Free-form data for extensions.</summary>
    public IReadOnlyDictionary<string, string>? Metadata { get; init; }
}

/// <summary>The matching rules of a route. All present rules must match.</summary>
public sealed record RouteMatch
{
    /// <summary>An ASP.NET Core route template such as <c>/api/{**catch-all}</c>.</summary>
    public string? Path { get; init; }

    /// <summary>
    /// Our extension to YARP's schema: a literal path prefix (<c>/api</c>) that matches the prefix
    /// itself and everything below it. Mutually exclusive with <see cref="Path"/>.
    /// </summary>
    public string? PathPrefix { get; init; }

    /// <summary>Host names (with optional <c>*.</c> wildcard and port).</summary>
    public IReadOnlyList<string>? Hosts { get; init; }

    /// <summary>HTTP methods; empty means any.</summary>
    public IReadOnlyList<string>? Methods { get; init; }

    /// <summary>Request header conditions.</summary>
    public IReadOnlyList<RouteHeaderMatch>? Headers { get; init; }

    /// <summary>Query string conditions.</summary>
    public IReadOnlyList<RouteQueryParameterMatch>? QueryParameters { get; init; }
}

/// <summary>How a header matcher compares values (YARP's names).</summary>
public enum HeaderMatchMode
{
    /// <summary>A header value equals one of the values.</summary>
    ExactHeader,
    /// <summary>A header value starts with one of the values.</summary>
    HeaderPrefix,
    /// <summary>A header value contains one of the values.</summary>
    Contains,
    /// <summary>No header value contains any of the values.</summary>
    NotContains,
    /// <summary>The header is present.</summary>
    Exists,
    /// <summary>The header is absent.</summary>
    NotExists,
}

/// <summary>How a query matcher compares values (YARP's names).</summary>
public enum QueryParameterMatchMode
{
    /// <summary>A value equals one of the values.</summary>
    Exact,
    /// <summary>A value contains one of the values.</summary>
    Contains,
    /// <summary>No value contains any of the values.</summary>
    NotContains,
    /// <summary>A value starts with one of the values.</summary>
    Prefix,
    /// <summary>The parameter is present.</summary>
    Exists,
}

/// <summary>A request header condition.</summary>
public sealed record RouteHeaderMatch
{
    /// <summary>The header name.</summary>
    public string Name { get; init; } = "";
    /// <summary>The values to compare with (any may match).</summary>
    public IReadOnlyList<string>? Values { get; init; }
    /// <summary>The comparison.</summary>
    public HeaderMatchMode Mode { get; init; } = HeaderMatchMode.ExactHeader;
    /// <summary>Compare values ordinally instead of ignoring case.</summary>
    public bool IsCaseSensitive { get; init; }
}

/// <summary>A query string condition.</summary>
public sealed record RouteQueryParameterMatch
{
    /// <summary>The parameter name.</summary>
    public string Name { get; init; } = "";
    /// <summary>The values to compare with (any may match).</summary>
    public IReadOnlyList<string>? Values { get; init; }
    /// <summary>The comparison.</summary>
    public QueryParameterMatchMode Mode { get; init; } = QueryParameterMatchMode.Exact;
    /// <summary>Compare values ordinally instead of ignoring case.</summary>
    public bool IsCaseSensitive { get; init; }
}
