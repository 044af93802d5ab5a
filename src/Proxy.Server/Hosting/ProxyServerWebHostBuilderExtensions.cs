using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Proxy.Server;

namespace Microsoft.AspNetCore.Hosting;

/// <summary>Hosting entry point, like Kestrel's UseKestrel.</summary>
public static class ProxyServerWebHostBuilderExtensions
{
    /// <summary>The configuration section <see cref="ProxyServerOptions"/> binds from.</summary>
    public const string ConfigurationSectionName = "ProxyServer";

    /// <summary>Runs the app on <see cref="ProxyServer"/> instead of Kestrel.</summary>
    /// <remarks>
    /// Options bind from the "ProxyServer" configuration section first (for example
    /// <c>ProxyServer:Http2:MaxConcurrentStreams</c> in appsettings.json, or
    /// <c>--ProxyServer:Http2:MaxConcurrentStreams=200</c> on the command line); <paramref name="configure"/> runs after.
    /// </remarks>
    public static IWebHostBuilder UseProxyServer(this IWebHostBuilder builder, Action<ProxyServerOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        return builder.ConfigureServices((context, services) =>
        {
            // Replace, not add: the default WebApplication builder registered Kestrel already.
            services.RemoveAll<IServer>();
            services.AddSingleton<IServer, ProxyServer>();
            var section = context.Configuration.GetSection(ConfigurationSectionName);
            services.AddOptions<ProxyServerOptions>().Bind(section).Configure(options =>
            {
                options.Configuration ??= section;
                options.ContentRootPath ??= context.HostingEnvironment.ContentRootPath;
            });
            if (configure is not null)
            {
                services.Configure(configure);
            }
        });
    }
}
