using Proxy.Protocols;

namespace Proxy.Benchmarks.Http1;

/// <summary>
/// The engine-seam version of Proxy.Load's <c>GET /size/100</c>: a content type, a Content-Length, a Date and
/// 100 octets written with one WriteAsync (what the ASP.NET glue would hand the engine, minus the glue).
/// </summary>
// Stateless: one instance serves every request.
internal sealed class SmallBodyHandler : IHttpRequestHandler
{
    public static readonly byte[] Body = CreateBody(100);

    public async Task HandleAsync(HttpExchange exchange)
    {
        exchange.ResponseHeaders.Add("Content-Type", "application/octet-stream");
        exchange.ResponseHeaders.Add("Content-Length", "100");
        exchange.ResponseHeaders.Add("Date", "Tue, 15 Apr 2025 09:30:00 GMT");
        await exchange.ResponseBody.WriteAsync(Body);
        // Returning completes the response.
    }

    private static byte[] CreateBody(int length)
    {
        var body = new byte[length];
        body.AsSpan().Fill((byte)'x');
        return body;
    }
}
