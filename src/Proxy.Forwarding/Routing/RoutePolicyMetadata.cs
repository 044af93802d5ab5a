using Microsoft.AspNetCore.Authorization;
using Microsoft.AspNetCore.Cors;
using Microsoft.AspNetCore.Http.Timeouts;
using Microsoft.AspNetCore.OutputCaching;
using Microsoft.AspNetCore.RateLimiting;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Routing;

/// <summary>
/// Turns a route's policy keys into the endpoint metadata ASP.NET Core's own middleware reads (UseAuthorization, UseCors,
/// UseRateLimiter, UseOutputCache, UseRequestTimeouts), so a proxied route is protected exactly like a controller or a
/// minimal API with the same attributes. The names were checked against the app's registrations when the config loaded.
/// </summary>
// Stateless; the shared instances below are immutable.
internal static class RoutePolicyMetadata
{
    private static readonly AuthorizeAttribute DefaultAuthorization = new();
    private static readonly AllowAnonymousAttribute Anonymous = new();
    private static readonly EnableCorsAttribute DefaultCors = new();
    private static readonly DisableCorsAttribute NoCors = new();
    private static readonly DisableRateLimitingAttribute NoRateLimiting = new();
    private static readonly DisableRequestTimeoutAttribute NoRequestTimeout = new();

    /// <summary>Adds the metadata; true when the route has a CORS setting, so its method matching must let preflights through.</summary>
    public static bool Add(RouteConfig route, IList<object> metadata)
    {
        if (route.AuthorizationPolicy is { Length: > 0 } auth)
        {
            metadata.Add(RoutePolicyNames.Is(auth, RoutePolicyNames.Default) ? DefaultAuthorization
                : RoutePolicyNames.Is(auth, RoutePolicyNames.Anonymous) ? Anonymous
                : new AuthorizeAttribute(auth));
        }

        var cors = route.CorsPolicy is { Length: > 0 };
        if (route.CorsPolicy is { Length: > 0 } corsName)
        {
            metadata.Add(RoutePolicyNames.Is(corsName, RoutePolicyNames.Default) ? DefaultCors
                : RoutePolicyNames.Is(corsName, RoutePolicyNames.Disable) ? NoCors
                : new EnableCorsAttribute(corsName));
        }

        // "default" adds nothing: the rate limiting middleware applies the app's global limiter to every endpoint anyway.
        if (route.RateLimiterPolicy is { Length: > 0 } limiter && !RoutePolicyNames.Is(limiter, RoutePolicyNames.Default))
        {
            metadata.Add(RoutePolicyNames.Is(limiter, RoutePolicyNames.Disable) ? NoRateLimiting : new EnableRateLimitingAttribute(limiter));
        }

        if (route.OutputCachePolicy is { Length: > 0 } cache)
        {
            metadata.Add(new OutputCacheAttribute { PolicyName = cache });
        }

        // The validator refuses TimeoutPolicy together with Timeout, so at most one of these applies.
        if (route.TimeoutPolicy is { Length: > 0 } timeout)
        {
            metadata.Add(RoutePolicyNames.Is(timeout, RoutePolicyNames.Disable) ? NoRequestTimeout : new RequestTimeoutAttribute(timeout));
        }
        else if (route.Timeout is { } span)
        {
            metadata.Add(new RequestTimeoutAttribute((int)Math.Min(int.MaxValue, Math.Ceiling(span.TotalMilliseconds))));
        }

        return cors;
    }
}
