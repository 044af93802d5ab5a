using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Proxy.Forwarding;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Relay;

/// <summary>Registration of the native relay.</summary>
public static class NativeRelayExtensions
{
    /// <summary>
    /// Lets clusters forward on our own HTTP/2 and HTTP/1.1 client connections (<c>"Transport": "Native"</c>). When the app
    /// runs on Proxy.Server (UseProxyServer) it is also the default for clusters that name no transport; on Kestrel
    /// clusters keep HttpClient unless they ask for Native.
    /// </summary>
    public static IProxyForwardingBuilder AddNativeRelay(this IProxyForwardingBuilder builder)
    {
        ArgumentNullException.ThrowIfNull(builder);
        builder.Services.AddNativeRelay();
        return builder;
    }

    /// <summary>The same as <see cref="AddNativeRelay(IProxyForwardingBuilder)"/>, on the service collection.</summary>
    public static IServiceCollection AddNativeRelay(this IServiceCollection services)
    {
        ArgumentNullException.ThrowIfNull(services);
        services.TryAddSingleton(TimeProvider.System);
        services.TryAddSingleton<NativeRelayTransport>();
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IForwarderTransport, NativeRelayTransport>(s => s.GetRequiredService<NativeRelayTransport>()));
        return services;
    }

    /// <summary>
    /// Turns on the direct path: requests of routes that need nothing from the ASP.NET Core pipeline are forwarded straight
    /// from Proxy.Server's exchange to the native relay, with no HttpContext and no middleware. Turn it on only when no
    /// middleware of yours must see proxied requests (an <c>app.Use</c> before the proxy endpoints would not see them).
    /// Routes that name a policy (authorization, CORS, rate limiting, output cache, timeouts), carry endpoint conventions,
    /// use transforms that need the HttpContext (route values, client certificate, response transforms, custom code), or
    /// whose cluster uses session affinity, a custom load balancer or HttpClient stay on the pipeline; so does any request
    /// endpoint routing would rank differently. The log says at the first request which routes go direct. Has no effect on
    /// Kestrel. Also registers the native relay.
    /// </summary>
    public static IServiceCollection AddDirectPath(this IServiceCollection services)
    {
        ArgumentNullException.ThrowIfNull(services);
        services.AddNativeRelay();
        services.TryAddSingleton<Proxy.Server.IDirectRequestHandler, Direct.DirectPathHandler>();
        return services;
    }
}
