using System.Reflection;
using Microsoft.AspNetCore.Authorization;
using Microsoft.AspNetCore.Cors.Infrastructure;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Timeouts;
using Microsoft.AspNetCore.OutputCaching;
using Microsoft.AspNetCore.RateLimiting;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Options;

namespace Proxy.Forwarding.Configuration;

/// <summary>The reserved policy names of a route (YARP's, compared ignoring case).</summary>
public static class RoutePolicyNames
{
    /// <summary>AuthorizationPolicy / CorsPolicy / RateLimiterPolicy: the app's default policy (for rate limiting: only the global limiter).</summary>
    public const string Default = "default";

    /// <summary>AuthorizationPolicy: allow anonymous access, even under a fallback policy.</summary>
    public const string Anonymous = "anonymous";

    /// <summary>CorsPolicy / RateLimiterPolicy / TimeoutPolicy: turn the app's policy off on this route.</summary>
    public const string Disable = "disable";

    internal static bool Is(string? value, string name) => string.Equals(value, name, StringComparison.OrdinalIgnoreCase);
}

/// <summary>
/// Checks that every policy a route names is registered by the app, through the same services ASP.NET Core's
/// middleware will ask at request time. A name nobody registered would otherwise fail only when a request arrives
/// (or, for rate limiting and output caching, never apply at all): an unprotected route served as if all were well.
/// </summary>
// Stateless; resolves the app's services on each validation so a reload sees the same registrations as requests do.
internal sealed class RoutePolicyValidator(IServiceProvider services)
{
    public void Validate(ProxyConfig config, string root, List<string> errors)
    {
        foreach (var route in config.Routes)
        {
            var path = $"{root}:Routes:{route.RouteId}";
            CheckAuthorization(route.AuthorizationPolicy, $"{path}:AuthorizationPolicy", errors);
            CheckCors(route.CorsPolicy, $"{path}:CorsPolicy", errors);
            CheckRateLimiter(route.RateLimiterPolicy, $"{path}:RateLimiterPolicy", errors);
            CheckOutputCache(route.OutputCachePolicy, $"{path}:OutputCachePolicy", errors);
            CheckTimeout(route.TimeoutPolicy, $"{path}:TimeoutPolicy", errors);
        }
    }

    private void CheckAuthorization(string? name, string path, List<string> errors)
    {
        if (string.IsNullOrEmpty(name) || RoutePolicyNames.Is(name, RoutePolicyNames.Anonymous))
        {
            return;
        }

        if (services.GetService<IAuthorizationPolicyProvider>() is not { } provider)
        {
            errors.Add($"{path}: '{name}' needs the app's authorization services: call services.AddAuthorization(...).");
            return;
        }

        var isDefault = RoutePolicyNames.Is(name, RoutePolicyNames.Default);
        // NOTE: configuration loads synchronously (startup and the reload callback); the built-in providers complete
        // at once, a custom asynchronous one blocks the load for as long as it takes.
        if (TryLookUp<AuthorizationPolicy>(async () => isDefault ? await provider.GetDefaultPolicyAsync() : await provider.GetPolicyAsync(name), path, errors, out var policy)
            && !isDefault && policy is null)
        {
            errors.Add($"{path}: '{name}' is not a registered authorization policy (AddAuthorization(o => o.AddPolicy(\"{name}\", ...))), nor default or anonymous.");
        }
    }

    private void CheckCors(string? name, string path, List<string> errors)
    {
        if (string.IsNullOrEmpty(name))
        {
            return;
        }

        // Even 'disable' needs them: routing refuses (500) an endpoint with CORS metadata that no UseCors() has seen,
        // and UseCors() cannot run without AddCors().
        if (services.GetService<ICorsPolicyProvider>() is not { } provider)
        {
            errors.Add($"{path}: '{name}' needs the app's CORS services and middleware: call services.AddCors(...) and app.UseCors().");
            return;
        }

        if (RoutePolicyNames.Is(name, RoutePolicyNames.Disable))
        {
            return;
        }

        var lookup = RoutePolicyNames.Is(name, RoutePolicyNames.Default) ? null : name;
        var context = new DefaultHttpContext { RequestServices = services };
        if (TryLookUp(() => provider.GetPolicyAsync(context, lookup), path, errors, out var policy) && policy is null)
        {
            errors.Add(lookup is null
                ? $"{path}: 'default' names the app's default CORS policy, and none is registered (AddCors(o => o.AddDefaultPolicy(...)))."
                : $"{path}: '{name}' is not a registered CORS policy (AddCors(o => o.AddPolicy(\"{name}\", ...))), nor default or disable.");
        }
    }

    private void CheckRateLimiter(string? name, string path, List<string> errors)
    {
        if (string.IsNullOrEmpty(name))
        {
            return;
        }

        // RateLimiterOptions keeps its named policies in internal maps (AddPolicy fills them); reading them is the only
        // way to know a name before a request asks for it. Both maps are looked at: policies built from DI go to the second.
        var options = services.GetService<IOptions<RateLimiterOptions>>()?.Value;
        var registered = options is not null && (HasKey(options, "PolicyMap", name) || HasKey(options, "UnactivatedPolicyMap", name));
        if (RoutePolicyNames.Is(name, RoutePolicyNames.Default) || RoutePolicyNames.Is(name, RoutePolicyNames.Disable))
        {
            if (registered)
            {
                errors.Add($"{path}: '{name}' is reserved on routes, but the app registered a rate limiter policy of that name: rename the policy.");
            }
        }
        else if (!registered)
        {
            errors.Add($"{path}: '{name}' is not a registered rate limiter policy (AddRateLimiter(o => o.AddPolicy(\"{name}\", ...)) or o.Add...Limiter(\"{name}\", ...)), nor default or disable.");
        }
    }

    private void CheckOutputCache(string? name, string path, List<string> errors)
    {
        if (string.IsNullOrEmpty(name))
        {
            return;
        }

        // Like rate limiting, OutputCacheOptions keeps its named policies internal (NamedPolicies).
        var options = services.GetService<IOptions<OutputCacheOptions>>()?.Value;
        if (options is null || !HasKey(options, "NamedPolicies", name))
        {
            errors.Add($"{path}: '{name}' is not a registered output cache policy (AddOutputCache(o => o.AddPolicy(\"{name}\", ...))).");
        }
    }

    private void CheckTimeout(string? name, string path, List<string> errors)
    {
        if (string.IsNullOrEmpty(name))
        {
            return;
        }

        var policies = services.GetService<IOptions<RequestTimeoutOptions>>()?.Value.Policies;
        var registered = policies?.ContainsKey(name) == true;
        if (RoutePolicyNames.Is(name, RoutePolicyNames.Disable))
        {
            if (registered)
            {
                errors.Add($"{path}: 'disable' is reserved on routes, but the app registered a request timeout policy of that name: rename the policy.");
            }
        }
        else if (!registered)
        {
            errors.Add($"{path}: '{name}' is not a registered request timeout policy (AddRequestTimeouts(o => o.AddPolicy(\"{name}\", ...))), nor disable.");
        }
    }

    private static bool HasKey(object options, string property, string name) =>
        options.GetType().GetProperty(property, BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public)?.GetValue(options)
            is System.Collections.IDictionary map && map.Contains(name);

    /// <summary>Runs a provider's lookup; false (with the reason added) when the provider itself failed.</summary>
    private static bool TryLookUp<T>(Func<Task<T?>> lookup, string path, List<string> errors, out T? policy)
        where T : class
    {
        try
        {
            policy = lookup().GetAwaiter().GetResult();
            return true;
        }
        catch (Exception ex)
        {
            errors.Add($"{path}: looking the policy up failed: {ex.Message}");
            policy = null;
            return false;
        }
    }
}
