// The gRPC echo service (src/Proxy.Demo/Grpc/echo.proto: Unary, ServerStream, ClientStream, Bidi,
// BidiHeadersFirst, Wait, Fail) standing alone on Proxy.Server: `dotnet run --project samples/GrpcBackend`.
// Listens on http://127.0.0.1:5102: h2c (HTTP/2 prior knowledge), which is what gRPC clients use without TLS.
//
// NOTE: this is not Grpc.AspNetCore. That package (and Grpc.Net.Client) cannot be restored from this
// repository's package mirror (Grpc.Core.Api and Grpc.Net.Common are missing), so the service runs on a
// small gRPC layer of our own in src/Proxy.Demo/Grpc (length-prefixed messages, grpc-status trailers,
// grpc-timeout deadlines, trailers-only errors) mapped as ordinary ASP.NET Core endpoints. The wire format
// is standard gRPC: grpc-js, grpcurl (with -proto echo.proto) or Grpc.Net.Client can call it. Where
// Grpc.AspNetCore is available, `builder.Services.AddGrpc(); app.MapGrpcService<T>();` runs on Proxy.Server
// the same way.
//
// Try it (a hand-made frame: EchoRequest { message = "hello" }):
//   printf '\0\0\0\0\7\n\5hello' | curl -s --http2-prior-knowledge -H 'content-type: application/grpc' \
//     -H 'te: trailers' --data-binary @- -i --output - http://127.0.0.1:5102/proxy.interop.Echo/Unary
using Proxy.Demo.Grpc;

var builder = WebApplication.CreateBuilder(args);
if (string.IsNullOrEmpty(builder.Configuration["urls"]))
{
    builder.WebHost.UseUrls("http://127.0.0.1:5102");
}

builder.WebHost.UseProxyServer();
builder.Logging.AddFilter("Microsoft.AspNetCore", LogLevel.Warning); // no per-request log lines

var app = builder.Build();
new EchoService().Map(app);
app.MapGet("/", () => $"gRPC echo service {EchoService.ServiceName} (h2c). See src/Proxy.Demo/Grpc/echo.proto.\n");
app.Run();
