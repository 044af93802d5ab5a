using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Relay;

/// <summary>The native relay as the forwarder sees it: one <see cref="NativeClusterTransport"/> per cluster.</summary>
// Stateless and shared; the clusters own their pools.
internal sealed class NativeRelayTransport(IServiceProvider services, ILoggerFactory loggers, TimeProvider time) : IForwarderTransport
{
    private readonly ILogger _logger = loggers.CreateLogger("Proxy.Relay");

    /// <summary>The default when the app runs on Proxy.Server.</summary>
    public bool IsDefault => services.GetService<IServer>() is Proxy.Server.ProxyServer;

    public IForwarderClusterTransport CreateCluster(ClusterConfig cluster) =>
        new NativeClusterTransport(cluster, _logger, time, services.GetService<IBackendConnectionMetrics>(), BackendSocketEngine());

    // The backend sockets use the engine the server's own sockets use (ProxyServer:Sockets:Engine).
    private Proxy.Transport.Sockets.SocketEngine BackendSocketEngine() =>
        services.GetService<IServer>() is Proxy.Server.ProxyServer
            && services.GetService<Microsoft.Extensions.Options.IOptions<Proxy.Server.ProxyServerOptions>>() is { } options
            ? options.Value.Sockets.Engine
            : Proxy.Transport.Sockets.SocketEngine.Runtime;
}
