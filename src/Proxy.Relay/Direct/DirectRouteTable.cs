using Microsoft.AspNetCore.Authorization;
using Microsoft.AspNetCore.Cors;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Timeouts;
using Microsoft.AspNetCore.RateLimiting;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Patterns;
using Microsoft.AspNetCore.Routing.Template;
using Proxy.Forwarding.Routing;

namespace Proxy.Relay.Direct;

/// <summary>A route the direct path takes, and its endpoint's route template (the <c>http.route</c> of the server's metrics).</summary>
internal sealed record DirectRoute(RouteState Route, string? HttpRoute);

/// <summary>
/// Which route a request would reach, decided the way ASP.NET Core's endpoint routing decides it, over every endpoint of
/// the app (not only the proxy's): the candidates whose path, host and method match, ordered by Order and then by route
/// precedence. The direct path takes a request only when the winner is unambiguous and is a proxy route that needs
/// nothing from the pipeline; whenever this table cannot be sure (a tie, a route parameter constraint, header or query
/// matchers, a host pattern with a port) it answers null and the request goes through the pipeline as before.
/// </summary>
// Immutable once built; rebuilt (and swapped whole) when the app's endpoints change.
internal sealed class DirectRouteTable
{
    private readonly Entry[] _entries;

    private DirectRouteTable(Entry[] entries, IReadOnlyList<Endpoint> source)
    {
        _entries = entries;
        Source = source;
    }

    /// <summary>The endpoint list this table was built from (a new list means the endpoints changed).</summary>
    public IReadOnlyList<Endpoint> Source { get; }

    /// <summary>Each proxy route with whether it goes direct, and why not.</summary>
    public IEnumerable<(string RouteId, string? NotDirectBecause)> Routes =>
        _entries.Where(e => e.Route is not null).Select(e => (e.Route!.RouteId, e.NotDirectBecause));

    [ThreadStatic]
    private static RouteValueDictionary? t_values;

    /// <summary>The route to forward the request to on the direct path, or null when the pipeline must see it.</summary>
    public DirectRoute? Match(string method, string authority, string path)
    {
        Entry? winner = null;
        foreach (var entry in _entries)
        {
            if (winner is not null && (entry.Order != winner.Order || entry.Precedence != winner.Precedence))
            {
                break; // past the winner's rank: nothing below can take the request
            }

            var match = entry.Matches(method, authority, path);
            if (match == MatchResult.No)
            {
                continue;
            }

            if (match == MatchResult.Unsure || winner is not null)
            {
                return null; // this table cannot rank it, or two endpoints tie: endpoint routing decides
            }

            winner = entry;
        }

        return winner is { NotDirectBecause: null } ? winner.Direct : null;
    }

    /// <param name="appWide">
    /// The app's own policies for endpoints that name none (an authorization FallbackPolicy, a global rate limiter, a default
    /// request timeout): their middleware applies them to every such route, so only routes that opt out may skip it.
    /// </param>
    public static DirectRouteTable Build(IReadOnlyList<Endpoint> endpoints, AppWidePolicies appWide)
    {
        var entries = new List<Entry>(endpoints.Count);
        foreach (var endpoint in endpoints)
        {
            entries.Add(Entry.For(endpoint, appWide));
        }

        entries.Sort(static (a, b) => a.Order != b.Order ? a.Order.CompareTo(b.Order) : a.Precedence.CompareTo(b.Precedence));
        return new DirectRouteTable([.. entries], endpoints);
    }

    /// <summary>A table that takes nothing (the endpoints could not be read): every request goes through the pipeline.</summary>
    public static DirectRouteTable Empty(IReadOnlyList<Endpoint> endpoints) =>
        new([Entry.Opaque()], endpoints);

    private enum MatchResult
    {
        No,
        Yes,
        Unsure,
    }

    /// <summary>
    /// The route pattern's leading literal segments as a path ("/proxy.interop.Echo" for "/proxy.interop.Echo/{**rest}"),
    /// or null when it starts with a parameter or a complex segment.
    /// </summary>
    internal static string? LiteralPrefix(RoutePattern pattern)
    {
        string? prefix = null;
        foreach (var segment in pattern.PathSegments)
        {
            if (!segment.IsSimple || segment.Parts[0] is not RoutePatternLiteralPart literal)
            {
                break;
            }
            prefix += "/" + literal.Content;
        }
        return prefix;
    }

    /// <summary>
    /// True when <see cref="CatchAllTakes"/> decides the match: the pattern is its literal segments and then one
    /// catch-all parameter ("/proxy.interop.Echo/{**rest}", "/{**catch-all}"). A parameter with a policy (a constraint)
    /// is left to the matcher.
    /// </summary>
    internal static bool PrefixDecides(RoutePattern pattern)
    {
        var segments = pattern.PathSegments;
        if (segments.Count == 0 || pattern.ParameterPolicies.Count > 0)
        {
            return false;
        }
        for (var i = 0; i < segments.Count - 1; i++)
        {
            if (!segments[i].IsSimple || segments[i].Parts[0] is not RoutePatternLiteralPart)
            {
                return false;
            }
        }
        var last = segments[^1];
        return last.IsSimple && last.Parts[0] is RoutePatternParameterPart { IsCatchAll: true, ParameterPolicies.Count: 0 };
    }

    /// <summary>
    /// The match of a pattern for which <see cref="PrefixDecides"/> holds: the literal segments, then a rest the catch-all
    /// takes, which may be empty but may not start with an empty segment ("/a//b" is no match for "/a/{**rest}").
    /// </summary>
    internal static bool CatchAllTakes(string? prefix, string path)
    {
        if (!PrefixAllows(prefix, path))
        {
            return false;
        }
        var rest = (prefix?.Length ?? 0) + 1; // past the "/" that ends the literal segments
        return path.Length <= rest || path[rest] != '/';
    }

    /// <summary>
    /// A necessary condition of the template matching <paramref name="path"/>: its first segments are the pattern's literal
    /// ones (ASCII case-insensitive, as the matcher compares literals), each ended by "/" or the path's end. False means the
    /// matcher would say no, so it is not asked; true decides nothing.
    /// </summary>
    internal static bool PrefixAllows(string? prefix, string path) =>
        prefix is null
        || (path.StartsWith(prefix, StringComparison.OrdinalIgnoreCase) && (path.Length == prefix.Length || path[prefix.Length] == '/'));

    private sealed class Entry
    {
        private TemplateMatcher? _matcher;
        // The pattern's leading literal segments: a path that does not start with them is no match without asking the
        // matcher (most routes of a table miss most requests, and the matcher was 1% of a direct gRPC call's CPU).
        private string? _literalPrefix;
        // The prefix check is the whole match (PrefixDecides): a gRPC service's route and the catch-all route do not ask
        // the matcher at all (it was 0.8% of a direct gRPC call's CPU samples after the prefix check).
        private bool _prefixDecides;
        private string[]? _methods;
        private string[]? _hosts;
        private bool _unsureWhenPathMatches;

        public int Order { get; private init; }

        public decimal Precedence { get; private init; }

        public RouteState? Route { get; private init; }

        /// <summary>The proxy route with its endpoint's http.route, for a request this entry takes.</summary>
        public DirectRoute? Direct { get; private init; }

        /// <summary>Null when the route goes direct; else the reason it does not (logged at startup).</summary>
        public string? NotDirectBecause { get; private set; }

        // Metadata that changes nothing a request goes through: the route itself, its match, and the "no policy" markers.
        private static readonly Type[] Harmless =
        [
            typeof(RouteState), typeof(HostAttribute), typeof(HttpMethodMetadata), typeof(AllowAnonymousAttribute),
            typeof(DisableCorsAttribute), typeof(DisableRateLimitingAttribute), typeof(DisableRequestTimeoutAttribute),
        ];

        /// <summary>An endpoint matched by something this table does not know: it may take any request, so nothing goes direct past it.</summary>
        public static Entry Opaque() => new() { Order = int.MinValue, Precedence = decimal.MinValue, _unsureWhenPathMatches = true };

        public static Entry For(Endpoint endpoint, AppWidePolicies appWide)
        {
            if (endpoint is not RouteEndpoint routeEndpoint)
            {
                return Opaque();
            }

            var pattern = routeEndpoint.RoutePattern;
            var route = endpoint.Metadata.GetMetadata<RouteState>();
            var entry = new Entry
            {
                Order = routeEndpoint.Order,
                Precedence = pattern.InboundPrecedence,
                Route = route,
                // NOTE: http.route as ASP.NET Core's hosting metrics take it: the endpoint's route diagnostics metadata.
                Direct = route is null ? null
                    : new DirectRoute(route, endpoint.Metadata.GetMetadata<Microsoft.AspNetCore.Http.Metadata.IRouteDiagnosticsMetadata>()?.Route),
            };
            entry._matcher = new TemplateMatcher(new RouteTemplate(pattern), new RouteValueDictionary(pattern.Defaults));
            entry._literalPrefix = LiteralPrefix(pattern);
            entry._prefixDecides = PrefixDecides(pattern);
            // Constraints ({id:int}) are not checked here, and header/query matchers are not either: such an endpoint is a
            // candidate this table cannot decide on.
            entry._unsureWhenPathMatches = pattern.ParameterPolicies.Count > 0 || endpoint.Metadata.GetMetadata<RequestMatchersMetadata>() is not null;
            if (endpoint.Metadata.GetMetadata<IHttpMethodMetadata>() is { HttpMethods.Count: > 0 } methods)
            {
                entry._methods = [.. methods.HttpMethods];
            }

            if (endpoint.Metadata.GetMetadata<IHostMetadata>() is { Hosts.Count: > 0 } hosts)
            {
                entry._hosts = [.. hosts.Hosts];
                // Ports and bare wildcards follow HostMatcherPolicy's rules for default ports; leave those to it.
                entry._unsureWhenPathMatches |= hosts.Hosts.Any(h => h.Contains(':') || h == "*");
            }

            var metadata = endpoint.Metadata;
            entry.NotDirectBecause = entry.Route is null ? "not a proxy route"
                : appWide.Authorization && metadata.GetMetadata<IAllowAnonymous>() is null ? "the app's authorization FallbackPolicy applies to it"
                : appWide.RateLimiting && metadata.GetMetadata<DisableRateLimitingAttribute>() is null ? "the app's global rate limiter applies to it"
                : appWide.RequestTimeout && metadata.GetMetadata<DisableRequestTimeoutAttribute>() is null ? "the app's default request timeout applies to it"
                : WhyNotDirect(endpoint, entry.Route, entry._unsureWhenPathMatches);
            return entry;
        }

        private static string? WhyNotDirect(Endpoint endpoint, RouteState route, bool unsure)
        {
            var config = route.Config;
            if (config.AuthorizationPolicy is { Length: > 0 } || config.CorsPolicy is { Length: > 0 } || config.RateLimiterPolicy is { Length: > 0 }
                || config.OutputCachePolicy is { Length: > 0 } || config.TimeoutPolicy is { Length: > 0 } || config.Timeout is not null)
            {
                return "it names a policy (authorization, CORS, rate limiting, output cache or timeout), which the pipeline applies";
            }

            foreach (var item in endpoint.Metadata)
            {
                if (item is not (RequestMatchersMetadata or Microsoft.AspNetCore.Http.Metadata.IRouteDiagnosticsMetadata) && Array.IndexOf(Harmless, item.GetType()) < 0)
                {
                    return $"its endpoint carries {item.GetType().Name} (added by a convention), which the pipeline applies";
                }
            }

            if (!route.Transformer.SupportsDirect)
            {
                return "a transform needs the HttpContext (route values, the client certificate, a response transform or custom code)";
            }

            return unsure ? "its match (constraints, header or query matchers, hosts with ports) is left to endpoint routing" : null;
        }

        public MatchResult Matches(string method, string authority, string path)
        {
            if (_matcher is null)
            {
                return MatchResult.Unsure;
            }

            if (_methods is not null && !MethodMatches(method))
            {
                return MatchResult.No;
            }

            if (_hosts is not null && !_unsureWhenPathMatches && !HostMatches(authority))
            {
                return MatchResult.No;
            }

            if (!PrefixAllows(_literalPrefix, path))
            {
                return MatchResult.No;
            }

            if (_prefixDecides)
            {
                return !CatchAllTakes(_literalPrefix, path) ? MatchResult.No : _unsureWhenPathMatches ? MatchResult.Unsure : MatchResult.Yes;
            }

            var values = t_values ??= new RouteValueDictionary();
            try
            {
                if (!_matcher.TryMatch(new PathString(path), values))
                {
                    return MatchResult.No;
                }
            }
            finally
            {
                values.Clear();
            }

            return _unsureWhenPathMatches ? MatchResult.Unsure : MatchResult.Yes;
        }

        private bool MethodMatches(string method)
        {
            foreach (var allowed in _methods!)
            {
                if (string.Equals(allowed, method, StringComparison.OrdinalIgnoreCase))
                {
                    return true;
                }
            }

            return false;
        }

        /// <summary>"example.com" or "*.example.com" against the request's host (its port, if any, ignored: no entry names one).</summary>
        private bool HostMatches(string authority)
        {
            var host = authority.AsSpan();
            if (host.StartsWith("["))
            {
                var close = host.IndexOf(']');
                host = close < 0 ? host : host[..(close + 1)];
            }
            else if (host.LastIndexOf(':') is var colon and >= 0)
            {
                host = host[..colon];
            }

            foreach (var allowed in _hosts!)
            {
                if (allowed.StartsWith("*.", StringComparison.Ordinal)
                    ? host.Length > allowed.Length - 1 && host.EndsWith(allowed.AsSpan(1), StringComparison.OrdinalIgnoreCase)
                    : host.Equals(allowed, StringComparison.OrdinalIgnoreCase))
                {
                    return true;
                }
            }

            return false;
        }
    }
}

/// <summary>Policies the app applies to every endpoint that names none of its own.</summary>
internal readonly record struct AppWidePolicies(bool Authorization, bool RateLimiting, bool RequestTimeout);
