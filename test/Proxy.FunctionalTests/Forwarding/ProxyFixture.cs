using System.Collections.Concurrent;
using System.Globalization;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding;
using Proxy.FunctionalTests.Hosting;
using Proxy.Server;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// One backend on Kestrel (HTTP/1.1 and h2c, no TLS) shared by two proxies, one per <see cref="ServerKind"/>,
/// each configured through the in-memory configuration provider with YARP's schema and listening on
/// 127.0.0.1:0 (TLS with ALPN h2 + http/1.1, and cleartext). Started on first use, stopped with the class.
/// </summary>
// Owned by xUnit (one instance per test class); BackendAsync/ProxyAsync may be called from parallel tests.
public abstract class ProxyFixture : IAsyncLifetime
{
    private readonly Lazy<Task<TestHost>> _backend;
    private readonly ConcurrentDictionary<ServerKind, Lazy<Task<TestHost>>> _proxies = new();

    protected ProxyFixture()
    {
        _backend = new Lazy<Task<TestHost>>(() => TestHost.StartAsync(ServerKind.Kestrel, MapBackend, https: false,
            configureServices: ConfigureBackendServices, configureBuilder: b => RaiseStreamLimit(b, ServerKind.Kestrel)));
    }

    /// <summary>The backend's endpoints.</summary>
    protected abstract void MapBackend(WebApplication app);

    /// <summary>The backend's services (e.g. <c>AddGrpc()</c>), before it is built.</summary>
    protected virtual void ConfigureBackendServices(IServiceCollection services)
    {
    }

    /// <summary>The proxy's routes and clusters, pointing at <paramref name="backend"/>.</summary>
    protected abstract void Configure(ReverseProxyKeys config, TestHost backend);

    /// <summary>
    /// The routes and clusters of the proxy hosted on <paramref name="kind"/>; by default the same for both
    /// (<see cref="Configure(ReverseProxyKeys, TestHost)"/>).
    /// </summary>
    protected virtual void Configure(ReverseProxyKeys config, TestHost backend, ServerKind kind) => Configure(config, backend);

    /// <summary>
    /// Runs once per proxy before any test uses it: one request through the whole path, so the first test does
    /// not pay for JIT and the backend connection inside a short deadline.
    /// </summary>
    protected virtual Task WarmUpAsync(TestHost proxy) => Task.CompletedTask;

    /// <summary>The proxy on our server takes the direct path (AddDirectPath): eligible requests skip the pipeline.</summary>
    protected virtual bool DirectPath => false;

    /// <summary>The proxy's pipeline: by default only the proxy endpoints.</summary>
    protected virtual void MapProxy(WebApplication app) => app.MapProxyForwarding();

    /// <summary>HTTP/2 streams per connection on the proxy and the backend; null = server defaults.</summary>
    protected virtual int? MaxConcurrentStreams => null;

    public Task<TestHost> BackendAsync() => _backend.Value;

    public Task<TestHost> ProxyAsync(ServerKind kind) =>
        _proxies.GetOrAdd(kind, k => new Lazy<Task<TestHost>>(() => StartProxyAsync(k))).Value;

    private async Task<TestHost> StartProxyAsync(ServerKind kind)
    {
        var backend = await BackendAsync();
        var keys = new ReverseProxyKeys();
        Configure(keys, backend, kind);
        var proxy = await TestHost.StartAsync(kind, MapProxy, https: true, configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(keys);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            if (DirectPath && kind == ServerKind.ProxyServer)
            {
                Proxy.Relay.NativeRelayExtensions.AddDirectPath(b.Services);
            }

            RaiseStreamLimit(b, kind);
        });
        try
        {
            await WarmUpAsync(proxy);
        }
        catch
        {
            await proxy.DisposeAsync();
            throw;
        }

        return proxy;
    }

    private void RaiseStreamLimit(WebApplicationBuilder builder, ServerKind kind)
    {
        if (MaxConcurrentStreams is not { } streams)
        {
            return;
        }

        if (kind == ServerKind.Kestrel)
        {
            builder.Services.Configure<KestrelServerOptions>(o => o.Limits.Http2.MaxStreamsPerConnection = streams);
        }
        else
        {
            builder.Services.Configure<ProxyServerOptions>(o => o.Http2.MaxConcurrentStreams = streams);
        }
    }

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        foreach (var lazy in _proxies.Values)
        {
            if (lazy.IsValueCreated && lazy.Value.IsCompletedSuccessfully)
            {
                await lazy.Value.Result.DisposeAsync();
            }
        }

        if (_backend.IsValueCreated && _backend.Value.IsCompletedSuccessfully)
        {
            await _backend.Value.Result.DisposeAsync();
        }
    }
}

/// <summary>Flat <c>ReverseProxy:...</c> keys, exactly what a YARP JSON file produces, for AddInMemoryCollection.</summary>
public sealed class ReverseProxyKeys : Dictionary<string, string?>
{
    public ReverseProxyKeys Route(string routeId, string clusterId, string path, int? order = null)
    {
        this[$"ReverseProxy:Routes:{routeId}:ClusterId"] = clusterId;
        this[$"ReverseProxy:Routes:{routeId}:Match:Path"] = path;
        if (order is { } o)
        {
            this[$"ReverseProxy:Routes:{routeId}:Order"] = o.ToString(CultureInfo.InvariantCulture);
        }

        return this;
    }

    /// <summary>The route matches only when header <paramref name="name"/> equals <paramref name="value"/>.</summary>
    public ReverseProxyKeys RouteHeader(string routeId, string name, string value)
    {
        this[$"ReverseProxy:Routes:{routeId}:Match:Headers:0:Name"] = name;
        this[$"ReverseProxy:Routes:{routeId}:Match:Headers:0:Values:0"] = value;
        return this;
    }

    public ReverseProxyKeys RouteSet(string routeId, string key, string value)
    {
        this[$"ReverseProxy:Routes:{routeId}:{key}"] = value;
        return this;
    }

    public ReverseProxyKeys Destination(string clusterId, string address, string destinationId = "d1")
    {
        this[$"ReverseProxy:Clusters:{clusterId}:Destinations:{destinationId}:Address"] = address;
        return this;
    }

    public ReverseProxyKeys ClusterSet(string clusterId, string key, string value)
    {
        this[$"ReverseProxy:Clusters:{clusterId}:{key}"] = value;
        return this;
    }

    /// <summary>The cluster speaks h2c (HTTP/2 prior knowledge) to its destinations.</summary>
    public ReverseProxyKeys H2c(string clusterId) =>
        ClusterSet(clusterId, "HttpRequest:Version", "2").ClusterSet(clusterId, "HttpRequest:VersionPolicy", "RequestVersionExact");

    /// <summary>A loopback address nobody listens on (bound, then released).</summary>
    public static string DeadAddress()
    {
        using var listener = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
        listener.Start();
        var port = ((System.Net.IPEndPoint)listener.LocalEndpoint).Port;
        listener.Stop();
        return $"http://127.0.0.1:{port}/";
    }
}
