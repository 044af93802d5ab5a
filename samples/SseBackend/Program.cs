// A small server-sent events service on Proxy.Server: `dotnet run --project samples/SseBackend`.
//   GET /events  -> "id: N / data: {...}" (unnamed: EventSource.onmessage sees them) every Sse:Interval (default 1 s), each event flushed
//                   as it is written. A client that reconnects with Last-Event-ID: N continues at N+1.
//   GET /        -> a one-line description
// Listens on http://127.0.0.1:5101 (HTTP/1.1 and h2c); override with --urls. Interval: --Sse:Interval=00:00:00.250.
// The stream itself is src/Proxy.Demo/Sse/ServerSentEvents.cs, shared with the standalone proxy's demo.
// Try it: curl -N http://127.0.0.1:5101/events   or resume:  curl -N -H 'Last-Event-ID: 41' http://127.0.0.1:5101/events
using Proxy.Demo.Sse;

var builder = WebApplication.CreateBuilder(args);
if (string.IsNullOrEmpty(builder.Configuration["urls"]))
{
    builder.WebHost.UseUrls("http://127.0.0.1:5101");
}

builder.WebHost.UseProxyServer();
builder.Logging.AddFilter("Microsoft.AspNetCore", LogLevel.Warning); // no per-request log lines
var options = builder.Configuration.GetSection("Sse").Get<SseOptions>() ?? new SseOptions();

var app = builder.Build();
app.MapGet("/", () => $"SSE backend: GET /events streams one event every {options.Interval.TotalMilliseconds} ms.\n");
app.MapServerSentEvents("/events", options);
app.Run();
