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
        app.MapGet("/", (HttpContext ctx) => Greeting(ctx.Request.Protocol));
        app.MapPost("/", async (HttpContext ctx) =>
        {
            // Drain the request so h2spec's DATA frames are consumed (and flow control exercised).
            var received = 0L;
            var buffer = new byte[16 * 1024];
            int read;
            while ((read = await ctx.Request.Body.ReadAsync(buffer, ctx.RequestAborted)) > 0)
            {
                received += read;
            }

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
}
