using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Demo.Grpc;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>The echo gRPC service (Grpc.AspNetCore) on a test host (h2c and TLS).</summary>
// Shared by the calls of one host; see EchoService for its state.
public sealed class GrpcAppFixture : HostFixture
{
    public EchoService Echo { get; } = new();

    protected override void ConfigureServices(IServiceCollection services) => services.AddEchoService(Echo);

    protected override void MapEndpoints(WebApplication app) => app.MapEchoService();
}
