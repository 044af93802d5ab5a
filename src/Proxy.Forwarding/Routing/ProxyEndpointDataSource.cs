using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Patterns;
using Microsoft.Extensions.Primitives;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Routing;

/// <summary>
/// One endpoint per route, rebuilt when a new snapshot is applied. Endpoints of unchanged routes
/// are reused (their RouteState instance is reused by the state manager).
/// </summary>
// Endpoints is read by routing on any thread; the cache is swapped as a whole under _lock.
internal sealed class ProxyEndpointDataSource : EndpointDataSource, IEndpointConventionBuilder
{
    private readonly ProxyStateManager _manager;
    private readonly RequestDelegate _handler;
    private readonly List<Action<EndpointBuilder>> _conventions = [];
    private readonly List<Action<EndpointBuilder>> _finallyConventions = [];
    private readonly Lock _lock = new();
    private ProxySnapshot? _builtFrom;
    private IReadOnlyList<Endpoint> _endpoints = [];
    private Dictionary<RouteState, Endpoint> _cache = [];

    public ProxyEndpointDataSource(ProxyStateManager manager, RequestDelegate handler)
    {
        _manager = manager;
        _handler = handler;
    }

    public override IReadOnlyList<Endpoint> Endpoints
    {
        get
        {
            var snapshot = _manager.Current;
            lock (_lock)
            {
                if (!ReferenceEquals(snapshot, _builtFrom))
                {
                    var cache = new Dictionary<RouteState, Endpoint>();
                    foreach (var route in snapshot.Routes.Values)
                    {
                        cache[route] = _cache.TryGetValue(route, out var existing) ? existing : CreateEndpoint(route);
                    }

                    _cache = cache;
                    _endpoints = cache.Values.ToArray();
                    _builtFrom = snapshot;
                }

                return _endpoints;
            }
        }
    }

    public override IChangeToken GetChangeToken() => _manager.ChangeToken;

    public void Add(Action<EndpointBuilder> convention) => _conventions.Add(convention);

    public void Finally(Action<EndpointBuilder> finallyConvention) => _finallyConventions.Add(finallyConvention);

    private Endpoint CreateEndpoint(RouteState route)
    {
        var match = route.Config.Match;
        var pattern = match.PathPrefix is { } prefix
            ? RoutePatternFactory.Parse(EscapeLiteral(prefix.TrimEnd('/')) + "/{**proxy-remainder}")
            : RoutePatternFactory.Parse(match.Path ?? "/{**catch-all}");

        var builder = new RouteEndpointBuilder(_handler, pattern, route.Config.Order ?? 0)
        {
            DisplayName = route.RouteId,
        };
        builder.Metadata.Add(route);
        var acceptCorsPreflight = RoutePolicyMetadata.Add(route.Config, builder.Metadata);
        if (match.Hosts is { Count: > 0 } hosts)
        {
            builder.Metadata.Add(new HostAttribute(hosts.ToArray()));
        }

        if (match.Methods is { Count: > 0 } methods)
        {
            builder.Metadata.Add(new HttpMethodMetadata(methods, acceptCorsPreflight));
        }

        if (match.Headers is { Count: > 0 } || match.QueryParameters is { Count: > 0 })
        {
            builder.Metadata.Add(new RequestMatchersMetadata(match.Headers ?? [], match.QueryParameters ?? []));
        }

        foreach (var convention in _conventions)
        {
            convention(builder);
        }

        foreach (var convention in _finallyConventions)
        {
            convention(builder);
        }

        return builder.Build();
    }

    // A prefix is literal text: braces would otherwise be read as route parameters.
    private static string EscapeLiteral(string text) => text.Replace("{", "{{", StringComparison.Ordinal).Replace("}", "}}", StringComparison.Ordinal);
}
