using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// The Hello-like app the command-line peers hit: GET / and POST / answer 200 with a body (what h2spec
/// expects), POST /echo returns the request body.
/// </summary>
public sealed class HelloAppFixture : HostFixture
{
    public static string Greeting(string protocol) => $"hello from {protocol}";

    protected override void MapEndpoints(WebApplication app)
    {
        // NOTE: both drain the request before answering. h2spec sends some requests without END_STREAM and then
        // provokes an error on the open stream (e.g. 6.9.1: WINDOW_UPDATE past 2^31-1 must draw RST_STREAM
        // FLOW_CONTROL_ERROR). Answering first would race it: the server could finish the response and reset
        // the stream with NO_ERROR before reading the bad frame.
        app.MapGet("/", async (HttpContext ctx) =>
        {
            await DrainAsync(ctx);
            await ctx.Response.WriteAsync(Greeting(ctx.Request.Protocol));
        });
        app.MapPost("/", async (HttpContext ctx) =>
        {
            var received = await DrainAsync(ctx);
            await ctx.Response.WriteAsync($"received {received} bytes over {ctx.Request.Protocol}");
        });
        app.MapPost("/echo", async (HttpContext ctx) =>
        {
            ctx.Response.ContentType = "application/octet-stream";
            using var buffer = new MemoryStream();
            await ctx.Request.Body.CopyToAsync(buffer, ctx.RequestAborted);
            buffer.Position = 0;
            await buffer.CopyToAsync(ctx.Response.Body, ctx.RequestAborted);
        });
    }

    private static async Task<long> DrainAsync(HttpContext ctx)
    {
        var received = 0L;
        var buffer = new byte[16 * 1024];
        int read;
        while ((read = await ctx.Request.Body.ReadAsync(buffer, ctx.RequestAborted)) > 0)
        {
            received += read;
        }

        return received;
    }
}
