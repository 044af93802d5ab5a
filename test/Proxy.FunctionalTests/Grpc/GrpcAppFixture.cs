using Proxy.Demo.Grpc;
using Microsoft.AspNetCore.Builder;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>The echo gRPC service on a test host (h2c and TLS).</summary>
// Shared by the calls of one host; see EchoService for its state.
public sealed class GrpcAppFixture : HostFixture
{
    public EchoService Echo { get; } = new();

    protected override void MapEndpoints(WebApplication app) => Echo.Map(app);
}
