using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc.Interop;

/// <summary>The interop service registered the way any Grpc.AspNetCore service is.</summary>
internal static class InteropHosting
{
    public static void AddInterop(IServiceCollection services, InteropService service)
    {
        services.AddGrpc();
        services.AddSingleton(service);
    }

    public static void MapInterop(WebApplication app) => app.MapGrpcService<InteropService>();
}

/// <summary>The interop service on each server directly (h2c and TLS).</summary>
// Owned by xUnit (one instance per test class); see InteropService for its state.
public sealed class InteropHostFixture : HostFixture
{
    public InteropService Service { get; } = new();

    protected override void ConfigureServices(IServiceCollection services) => InteropHosting.AddInterop(services, Service);

    protected override void MapEndpoints(WebApplication app) => InteropHosting.MapInterop(app);
}

/// <summary>
/// The interop service on a Kestrel backend (h2c) behind the proxy, hosted on each server (h2c and TLS in front): on
/// our server through the native relay (set explicitly, so the test cannot pass on HttpClient by accident), on
/// Kestrel through HttpClient. One catch-all route, so unknown services and methods reach the backend too.
/// </summary>
// Owned by xUnit (one instance per test class); see InteropService for its state.
public class InteropProxyFixture : ProxyFixture
{
    public InteropService Service { get; } = new();

    protected override void ConfigureBackendServices(IServiceCollection services) => InteropHosting.AddInterop(services, Service);

    protected override void MapBackend(WebApplication app) => InteropHosting.MapInterop(app);

    protected override void Configure(ReverseProxyKeys config, TestHost backend) =>
        config.Route("grpc", "interop", "/{**rest}").Destination("interop", backend.H2cAddress.ToString()).H2c("interop");

    protected override void Configure(ReverseProxyKeys config, TestHost backend, ServerKind kind)
    {
        Configure(config, backend);
        if (kind == ServerKind.ProxyServer)
        {
            config.ClusterSet("interop", "Transport", ForwarderTransports.Native);
        }
    }

    protected override async Task WarmUpAsync(TestHost proxy)
    {
        // JIT and the backend connection, paid here rather than inside the first test's deadline.
        foreach (var transport in new[] { HttpTransport.Http2Cleartext, HttpTransport.Http2Tls })
        {
            using var channel = GrpcChannels.Create(proxy, transport);
            await new Interop.InteropClient(channel).EmptyAsync(new Nothing());
        }
    }
}

/// <summary>
/// The same with the direct path on our server (AddDirectPath): the gRPC calls skip the pipeline. A middleware counts the
/// requests that still reach it, so a test can show the calls went direct.
/// </summary>
// Owned by xUnit (one instance per test class); the counter is written by the proxy's request threads.
public sealed class InteropDirectProxyFixture : InteropProxyFixture
{
    private int _pipelineRequests;

    /// <summary>Requests that went through the proxy's ASP.NET Core pipeline (on either server).</summary>
    public int PipelineRequests => Volatile.Read(ref _pipelineRequests);

    protected override bool DirectPath => true;

    protected override void MapProxy(WebApplication app)
    {
        app.Use((context, next) =>
        {
            Interlocked.Increment(ref _pipelineRequests);
            return next(context);
        });
        base.MapProxy(app);
    }
}
