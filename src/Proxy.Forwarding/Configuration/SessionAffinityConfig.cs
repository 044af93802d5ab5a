using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// Session affinity (YARP's <c>Clusters:{name}:SessionAffinity</c>): the first response carries a key naming the destination
/// that served it, and later requests with that key go to the same destination while it is available.
/// </summary>
public sealed record SessionAffinityConfig
{
    /// <summary>Turns affinity on for the cluster.</summary>
    public bool? Enabled { get; init; }

    /// <summary>Where the key travels and how it is encoded: one of <see cref="SessionAffinityPolicies"/>; null = HashCookie.</summary>
    public string? Policy { get; init; }

    /// <summary>
    /// What happens when the key names a destination that is not available (unhealthy, removed) or cannot be read:
    /// <c>Redistribute</c> (default: load balancing picks another, whose key replaces the old one) or <c>Return503Error</c>.
    /// </summary>
    public string? FailurePolicy { get; init; }

    /// <summary>The cookie or header name that carries the key. Required.</summary>
    public string? AffinityKeyName { get; init; }

    /// <summary>The cookie's attributes (cookie policies only).</summary>
    public SessionAffinityCookieConfig? Cookie { get; init; }
}

/// <summary>The affinity cookie's attributes (ASP.NET Core's <see cref="CookieOptions"/>).</summary>
public sealed record SessionAffinityCookieConfig
{
    /// <summary>Domain attribute; null = the request's host only.</summary>
    public string? Domain { get; init; }

    /// <summary>Expires attribute, relative to the response; null = a session cookie.</summary>
    public TimeSpan? Expiration { get; init; }

    /// <summary>HttpOnly attribute; default true.</summary>
    public bool? HttpOnly { get; init; }

    /// <summary>Whether the cookie is essential under a consent policy (CookiePolicyMiddleware); default false.</summary>
    public bool? IsEssential { get; init; }

    /// <summary>Max-Age attribute; null = none.</summary>
    public TimeSpan? MaxAge { get; init; }

    /// <summary>Path attribute; default <c>/</c>.</summary>
    public string? Path { get; init; }

    /// <summary>SameSite attribute; default Unspecified (no attribute).</summary>
    public SameSiteMode? SameSite { get; init; }

    /// <summary>Secure attribute: SameAsRequest (default), Always or None.</summary>
    public CookieSecurePolicy? SecurePolicy { get; init; }
}

/// <summary>The session affinity policies (YARP's names).</summary>
public static class SessionAffinityPolicies
{
    /// <summary>A cookie holding the destination's name, protected with ASP.NET Core Data Protection.</summary>
    public const string Cookie = nameof(Cookie);

    /// <summary>A request/response header holding the destination's name, protected with Data Protection.</summary>
    public const string CustomHeader = nameof(CustomHeader);

    /// <summary>A cookie holding a short hash of the destination's name (default): no key ring to share between proxies.</summary>
    public const string HashCookie = nameof(HashCookie);

    /// <summary>A cookie holding the SHA-256 of the destination's name in hex, the form IIS ARR uses.</summary>
    public const string ArrCookie = nameof(ArrCookie);
}

/// <summary>The session affinity failure policies (YARP's names).</summary>
public static class SessionAffinityFailurePolicies
{
    /// <summary>Load balancing picks another destination; its key replaces the old one.</summary>
    public const string Redistribute = nameof(Redistribute);

    /// <summary>The request is answered 503.</summary>
    public const string Return503Error = nameof(Return503Error);
}
