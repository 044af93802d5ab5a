using System.Text;

namespace Proxy.Host.Admin;

/// <summary>
/// Admin <c>/</c>: one static page (embedded, inline script and style, no build step, no CDN) that draws the snapshots
/// of <c>/dashboard/events</c>, a server-sent event stream of one JSON snapshot a second.
/// </summary>
internal static class Dashboard
{
    private const string ResourceName = "Proxy.Host.Admin.dashboard.html";

    private static readonly Lazy<byte[]> Page = new(() =>
    {
        using var stream = typeof(Dashboard).Assembly.GetManifestResourceStream(ResourceName)
            ?? throw new InvalidOperationException($"The embedded resource {ResourceName} is missing (see Proxy.Host.csproj).");
        using var copy = new MemoryStream();
        stream.CopyTo(copy);
        return copy.ToArray();
    });

    public static void Map(WebApplication app, DashboardFeed feed)
    {
        app.MapGet("/", () => Results.Bytes(Page.Value, "text/html; charset=utf-8"));
        app.MapGet("/dashboard/snapshot", () => Results.Text(feed.Current(), "application/json"));
        app.MapGet("/dashboard/events", async (HttpContext context, IHostApplicationLifetime lifetime) =>
        {
            context.Response.ContentType = "text/event-stream";
            context.Response.Headers.CacheControl = "no-cache";
            // The stream ends when the page goes or the admin endpoint stops (it would otherwise hold the stop for its timeout).
            using var stop = CancellationTokenSource.CreateLinkedTokenSource(context.RequestAborted, lifetime.ApplicationStopping);
            try
            {
                await foreach (var snapshot in feed.SubscribeAsync(stop.Token))
                {
                    await context.Response.WriteAsync($"data: {snapshot}\n\n", Encoding.UTF8, stop.Token);
                    await context.Response.Body.FlushAsync(stop.Token);
                }
            }
            catch (OperationCanceledException) when (stop.IsCancellationRequested)
            {
                // The page closed, or the admin endpoint is stopping.
            }
        });
    }
}
