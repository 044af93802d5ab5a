using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Configuration;
using Proxy.FunctionalTests.Hosting;
using Proxy.Relay;
using Proxy.Server;
using Proxy.Transport.Sockets;

namespace Proxy.FunctionalTests.Relay;

/// <summary>The relay's backend sockets run on the engine the server's own sockets run on (ProxyServer:Sockets:Engine).</summary>
public class RelaySocketEngineTests
{
    public static TheoryData<SocketEngine> Engines() =>
        OperatingSystem.IsLinux() ? new TheoryData<SocketEngine> { SocketEngine.Runtime, SocketEngine.Epoll } : new TheoryData<SocketEngine> { SocketEngine.Runtime };

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task BackendPools_UseTheServersSocketEngine(SocketEngine engine)
    {
        await using var proxy = await TestHost.StartAsync(ServerKind.ProxyServer, _ => { }, https: false,
            configureServices: s => s.Configure<ProxyServerOptions>(o => o.Sockets.Engine = engine));
        var relay = proxy.App.Services.GetRequiredService<NativeRelayTransport>();

        var cluster = (NativeClusterTransport)relay.CreateCluster(new ClusterConfig
        {
            ClusterId = "c",
            Destinations = new Dictionary<string, DestinationConfig> { ["d"] = new() { Address = "http://127.0.0.1:1/" } },
        });

        Assert.Equal(engine, cluster.Settings.Sockets.Engine);
    }
}
