// The forwarding library inside an ordinary Kestrel app: `dotnet run --project samples/ForwardingInExistingApp`.
// Kestrel endpoints (appsettings.json): http://127.0.0.1:5100 (HTTP/1.1) and http://127.0.0.1:5103 (h2c only:
// Kestrel serves cleartext HTTP/2 only on an HTTP/2-only endpoint, and gRPC clients need it).
// Start the backends first (samples/SseBackend on :5101, samples/GrpcBackend on :5102), then:
//   curl http://127.0.0.1:5100/                 -> this app's own endpoint
//   curl -N http://127.0.0.1:5100/events        -> configured route "events" (appsettings.json) to the SSE backend
//   curl -N http://127.0.0.1:5100/legacy/events -> the one-off direct route below, /legacy stripped
//   printf '\0\0\0\0\7\n\5hello' | curl -s --http2-prior-knowledge -H 'content-type: application/grpc' \
//     -H 'te: trailers' --data-binary @- -i --output - http://127.0.0.1:5103/proxy.interop.Echo/Unary
// Edit appsettings.json while it runs: routes reload without a restart.
using System.Net;
using Proxy.Forwarding;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Transforms;

var builder = WebApplication.CreateBuilder(args);
builder.Services.AddProxyForwarding().LoadFromConfig(builder.Configuration.GetSection("ReverseProxy"));

var app = builder.Build();

// The app's own endpoints keep working next to the proxied routes.
app.MapGet("/", () => "An existing app. Proxied: /events, /legacy/events, gRPC proxy.interop.Echo.\n");
app.MapGet("/api/time", () => new { utc = DateTimeOffset.UtcNow });

// Configured routes (ReverseProxy section): one endpoint per route, so authorization, rate limiting, CORS
// and other endpoint metadata apply as they do to any endpoint.
app.MapProxyForwarding();

// One direct route through IHttpForwarder: no config, our own client and transformer.
var legacyClient = new HttpMessageInvoker(new SocketsHttpHandler
{
    // A proxy must not follow redirects, decompress, keep cookies or use a system proxy on its own.
    UseProxy = false,
    AllowAutoRedirect = false,
    AutomaticDecompression = DecompressionMethods.None,
    UseCookies = false,
    ConnectTimeout = TimeSpan.FromSeconds(10),
});
var legacyTransformer = new StripPrefixTransformer("/legacy");
app.Map("/legacy/{**rest}", async (HttpContext context, IHttpForwarder forwarder) =>
{
    var error = await forwarder.SendAsync(context, "http://127.0.0.1:5101/", legacyClient, ForwarderRequestConfig.Empty, legacyTransformer);
    if (error != ForwarderError.None)
    {
        // The forwarder already set 502/503/504; the feature has the exception for logs.
        var failure = context.Features.Get<IForwarderErrorFeature>();
        app.Logger.LogWarning(failure?.Exception, "Legacy forwarding failed: {Error}", error);
    }
});

app.Run();

/// <summary>Copies the request as the default transformer does, then removes a path prefix.</summary>
internal sealed class StripPrefixTransformer(PathString prefix) : HttpTransformer
{
    public override async ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
    {
        await base.TransformRequestAsync(httpContext, proxyRequest, destinationPrefix, cancellationToken);
        var path = httpContext.Request.Path.StartsWithSegments(prefix, out var rest) ? rest : httpContext.Request.Path;
        proxyRequest.RequestUri = MakeDestinationAddress(destinationPrefix, path, httpContext.Request.QueryString);
    }
}
