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
}
