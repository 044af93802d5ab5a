using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Proxy.Server;

namespace Microsoft.AspNetCore.Hosting;

/// <summary>Hosting entry point, like Kestrel's UseKestrel.</summary>
public static class ProxyServerWebHostBuilderExtensions
{
    /// <summary>Runs the app on <see cref="ProxyServer"/> instead of Kestrel.</summary>
    public static IWebHostBuilder UseProxyServer(this IWebHostBuilder builder, Action<ProxyServerOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        return builder.ConfigureServices(services =>
        {
            // Replace, not add: the default WebApplication builder registered Kestrel already.
            services.RemoveAll<IServer>();
            services.AddSingleton<IServer, ProxyServer>();
            services.AddOptions<ProxyServerOptions>();
            if (configure is not null)
            {
                services.Configure(configure);
            }
        });
    }
}
