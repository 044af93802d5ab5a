using System.Globalization;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;

namespace Proxy.Demo.Sse;

/// <summary>
/// A demo server-sent events endpoint: one event every <see cref="SseOptions.Interval"/>, numbered, each
/// flushed as soon as it is written; a reconnecting client that sends Last-Event-ID resumes after that id.
/// </summary>
public static class ServerSentEvents
{
    /// <summary>Maps GET <paramref name="pattern"/> to the event stream.</summary>
    public static IEndpointConventionBuilder MapServerSentEvents(this IEndpointRouteBuilder routes, string pattern, SseOptions options) =>
        routes.MapGet(pattern, (HttpContext context) => StreamAsync(context, options, TimeProvider.System));

    /// <summary>
    /// Writes events until the client goes away, the host stops (the response then ends cleanly, so a graceful
    /// shutdown does not wait for its timeout), or <see cref="SseOptions.MaxEvents"/> were sent.
    /// </summary>
    public static async Task StreamAsync(HttpContext context, SseOptions options, TimeProvider time)
    {
        var aborted = context.RequestAborted;
        var stopping = context.RequestServices?.GetService<IHostApplicationLifetime>()?.ApplicationStopping ?? CancellationToken.None;
        using var ended = CancellationTokenSource.CreateLinkedTokenSource(aborted, stopping);
        var response = context.Response;
        response.ContentType = "text/event-stream";
        response.Headers.CacheControl = "no-cache";

        // WHATWG HTML §9.2 (server-sent events): a reconnecting EventSource sends the last id it saw in
        // Last-Event-ID; we continue with the next one instead of starting over.
        var next = ParseLastEventId(context.Request.Headers["Last-Event-ID"]) + 1;

        // The retry field tells EventSource how long to wait before reconnecting.
        await response.WriteAsync($"retry: {(long)options.Interval.TotalMilliseconds}\n\n", aborted);
        await response.Body.FlushAsync(aborted);

        for (var sent = 0; options.MaxEvents is not { } max || sent < max; sent++, next++)
        {
            // No event: field, so each is a "message" event: a browser's EventSource.onmessage sees it.
            var data = string.Create(CultureInfo.InvariantCulture, $"{{\"id\":{next},\"time\":\"{time.GetUtcNow():O}\"}}");
            await response.WriteAsync($"id: {next}\ndata: {data}\n\n", aborted);
            await response.Body.FlushAsync(aborted);
            try
            {
                await Task.Delay(options.Interval, time, ended.Token);
            }
            catch (OperationCanceledException)
            {
                return; // The client went away or the host is stopping: nothing more to say.
            }
        }
    }

    /// <summary>The numeric id a client resumes from, or 0 (start from 1) when absent or not a number.</summary>
    public static long ParseLastEventId(string? value) =>
        long.TryParse(value, NumberStyles.None, CultureInfo.InvariantCulture, out var id) && id >= 0 ? id : 0;
}

/// <summary>Settings of the demo event stream.</summary>
public sealed class SseOptions
{
    /// <summary>Time between two events. Default 1 s.</summary>
    public TimeSpan Interval { get; set; } = TimeSpan.FromSeconds(1);

    /// <summary>Events per connection before the response ends; null (default) streams until the client leaves.</summary>
    public int? MaxEvents { get; set; }
}
