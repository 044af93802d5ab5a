// Placeholder until Proxy.Server exists: see issue "Server engine".
var builder = WebApplication.CreateBuilder(args);
var app = builder.Build();
app.MapGet("/", () => "Hello from Proxy.Server\n");
app.Run();
