using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Matching;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Routing;

/// <summary>The header and query conditions of a route, attached to its endpoint.</summary>
// Immutable.
internal sealed class RequestMatchersMetadata(IReadOnlyList<RouteHeaderMatch> headers, IReadOnlyList<RouteQueryParameterMatch> query)
{
    /// <summary>More conditions = more specific = preferred when several routes match.</summary>
    public int Specificity => headers.Count + query.Count;

    public bool Matches(HttpContext context)
    {
        foreach (var h in headers)
        {
            context.Request.Headers.TryGetValue(h.Name, out var values);
            if (!MatchHeader(h, values))
            {
                return false;
            }
        }

        foreach (var q in query)
        {
            context.Request.Query.TryGetValue(q.Name, out var values);
            if (!MatchQuery(q, values))
            {
                return false;
            }
        }

        return true;
    }

    private static bool MatchHeader(RouteHeaderMatch m, Microsoft.Extensions.Primitives.StringValues values)
    {
        var comparison = m.IsCaseSensitive ? StringComparison.Ordinal : StringComparison.OrdinalIgnoreCase;
        return m.Mode switch
        {
            HeaderMatchMode.Exists => values.Count > 0,
            HeaderMatchMode.NotExists => values.Count == 0,
            HeaderMatchMode.ExactHeader => Any(values, m.Values, (v, x) => string.Equals(v, x, comparison)),
            HeaderMatchMode.HeaderPrefix => Any(values, m.Values, (v, x) => v.StartsWith(x, comparison)),
            HeaderMatchMode.Contains => Any(values, m.Values, (v, x) => v.Contains(x, comparison)),
            HeaderMatchMode.NotContains => values.Count > 0 && !Any(values, m.Values, (v, x) => v.Contains(x, comparison)),
            _ => false,
        };
    }

    private static bool MatchQuery(RouteQueryParameterMatch m, Microsoft.Extensions.Primitives.StringValues values)
    {
        var comparison = m.IsCaseSensitive ? StringComparison.Ordinal : StringComparison.OrdinalIgnoreCase;
        return m.Mode switch
        {
            QueryParameterMatchMode.Exists => values.Count > 0,
            QueryParameterMatchMode.Exact => Any(values, m.Values, (v, x) => string.Equals(v, x, comparison)),
            QueryParameterMatchMode.Prefix => Any(values, m.Values, (v, x) => v.StartsWith(x, comparison)),
            QueryParameterMatchMode.Contains => Any(values, m.Values, (v, x) => v.Contains(x, comparison)),
            QueryParameterMatchMode.NotContains => values.Count > 0 && !Any(values, m.Values, (v, x) => v.Contains(x, comparison)),
            _ => false,
        };
    }

    private static bool Any(Microsoft.Extensions.Primitives.StringValues actual, IReadOnlyList<string>? expected, Func<string, string, bool> test)
    {
        foreach (var value in actual)
        {
            foreach (var candidate in expected ?? [])
            {
                if (value is not null && test(value, candidate))
                {
                    return true;
                }
            }
        }

        return false;
    }
}

/// <summary>
/// Filters proxy endpoints by their header/query conditions and ranks the more specific ones first,
/// so a route with a header condition beats the same path without one instead of being ambiguous.
/// </summary>
// Stateless.
internal sealed class RequestMatchersPolicy : MatcherPolicy, IEndpointComparerPolicy, IEndpointSelectorPolicy
{
    public override int Order => -100;

    public IComparer<Endpoint> Comparer { get; } = Comparer<Endpoint>.Create((x, y) =>
        Specificity(y).CompareTo(Specificity(x)));

    public bool AppliesToEndpoints(IReadOnlyList<Endpoint> endpoints) =>
        endpoints.Any(e => e.Metadata.GetMetadata<RequestMatchersMetadata>() is not null);

    public Task ApplyAsync(HttpContext httpContext, CandidateSet candidates)
    {
        for (var i = 0; i < candidates.Count; i++)
        {
            if (candidates.IsValidCandidate(i)
                && candidates[i].Endpoint.Metadata.GetMetadata<RequestMatchersMetadata>() is { } matchers
                && !matchers.Matches(httpContext))
            {
                candidates.SetValidity(i, false);
            }
        }

        return Task.CompletedTask;
    }

    private static int Specificity(Endpoint endpoint) => endpoint.Metadata.GetMetadata<RequestMatchersMetadata>()?.Specificity ?? 0;
}
