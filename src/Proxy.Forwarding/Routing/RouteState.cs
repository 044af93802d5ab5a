using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Routing;

/// <summary>The runtime form of a route: its config and transformer. The cluster is looked up per request.</summary>
// Immutable; replaced as a whole when the route's config changes.
internal sealed class RouteState(RouteConfig config, HttpTransformer transformer)
{
    public RouteConfig Config { get; } = config;

    public HttpTransformer Transformer { get; } = transformer;

    public string RouteId => Config.RouteId;
}
