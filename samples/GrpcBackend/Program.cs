// The gRPC echo service (src/Proxy.Demo/Grpc/echo.proto: Unary, ServerStream, ClientStream, Bidi,
// BidiHeadersFirst, Wait, Fail) standing alone on Proxy.Server: `dotnet run --project samples/GrpcBackend`.
// Listens on http://127.0.0.1:5102: h2c (HTTP/2 prior knowledge), which is what gRPC clients use without TLS.
//
// The service is plain Grpc.AspNetCore (src/Proxy.Demo/Grpc/EchoService.cs derives from the generated
// Echo.EchoBase): `builder.Services.AddGrpc(); app.MapGrpcService<T>();` as on Kestrel. Only the server
// differs: `builder.WebHost.UseProxyServer()`. Any gRPC client can call it: Grpc.Net.Client, grpc-js,
// grpcurl (with -proto echo.proto).
//
// Try it without a gRPC client (a hand-made frame: EchoRequest { message = "hello" }):
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
builder.Logging.AddFilter("Grpc", LogLevel.Warning);
builder.Services.AddGrpc();
builder.Services.AddSingleton<EchoService>();

var app = builder.Build();
app.MapGrpcService<EchoService>();
app.MapGet("/", () => $"gRPC echo service {EchoService.ServiceName} (h2c). See src/Proxy.Demo/Grpc/echo.proto.\n");
app.Run();
