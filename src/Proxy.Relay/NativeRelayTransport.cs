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
        new NativeClusterTransport(cluster, _logger, time, services.GetService<IBackendConnectionMetrics>(), ServerSockets() is { } sockets
            ? (sockets.Engine, sockets.EpollThreads)
            : (Proxy.Transport.Sockets.SocketEngine.Runtime, 0));

    // The backend sockets use the engine the server's own sockets use (ProxyServer:Sockets:Engine and EpollThreads: one
    // engine per process, so an active health probe that connects before the first listener binds starts it as the
    // listeners want it).
    private Proxy.Transport.Sockets.SocketTransportOptions? ServerSockets() =>
        services.GetService<IServer>() is Proxy.Server.ProxyServer
            && services.GetService<Microsoft.Extensions.Options.IOptions<Proxy.Server.ProxyServerOptions>>() is { } options
            ? options.Value.Sockets
            : null;
}
