// A minimal app on Proxy.Server: `dotnet run --project samples/Hello`.
//   GET|POST /   -> 200 with a short body (h2spec probes both)
//   GET /events  -> server-sent events, one per second, flushed each time
//   POST /echo   -> the request body, streamed back
// Default URLs: http://127.0.0.1:5000 (HTTP/1.1 + h2c) and https://127.0.0.1:5001 (ALPN h2/http1.1,
// development certificate in $HOME/.proxy). Override with --urls or ASPNETCORE_URLS.
var builder = WebApplication.CreateBuilder(args);
if (string.IsNullOrEmpty(builder.Configuration["urls"]))
{
    builder.WebHost.UseUrls("http://127.0.0.1:5000", "https://127.0.0.1:5001");
}
builder.WebHost.UseProxyServer();

var app = builder.Build();

// NOTE: reads the request body to its end before answering, as most apps do. h2spec's malformed-request
// probes (bad trailers, content-length mismatch, DATA after RST_STREAM, WINDOW_UPDATE overflow) expect a
// stream error and do not skip a response that races ahead of it; an app that answers first makes them flaky.
app.MapMethods("/", ["GET", "POST"], async (HttpContext context) =>
{
    await context.Request.Body.CopyToAsync(Stream.Null, context.RequestAborted);
    return "Hello from Proxy.Server\n";
});

app.MapGet("/events", async (HttpContext context, CancellationToken aborted) =>
{
    context.Response.ContentType = "text/event-stream";
    context.Response.Headers.CacheControl = "no-cache";
    for (var id = 1; !aborted.IsCancellationRequested; id++)
    {
        await context.Response.WriteAsync($"id: {id}\ndata: {{\"time\":\"{DateTimeOffset.UtcNow:O}\"}}\n\n", aborted);
        await context.Response.Body.FlushAsync(aborted);
        try
        {
            await Task.Delay(TimeSpan.FromSeconds(1), aborted);
        }
        catch (OperationCanceledException)
        {
            break;
        }
    }
});

app.MapPost("/echo", async (HttpContext context) =>
{
    context.Response.ContentType = context.Request.ContentType ?? "application/octet-stream";
    await context.Request.BodyReader.CopyToAsync(context.Response.BodyWriter, context.RequestAborted);
});

app.Run();
