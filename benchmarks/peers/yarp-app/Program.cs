// YARP as a peer in the comparison: the same ReverseProxy section as our proxy (benchmarks/peers/proxy.json), on
// Kestrel with one endpoint per protocol (Kestrel speaks h2c only on an HTTP/2-only endpoint).
//   dotnet YarpApp.dll --config proxy.json --h1 18080 --h2c 18081 --tls 18443 --cert cert.pfx
using System.Net;
using Microsoft.AspNetCore.Server.Kestrel.Core;

var options = args.Chunk(2).ToDictionary(p => p[0].TrimStart('-'), p => p[1]);
var builder = WebApplication.CreateSlimBuilder();
builder.Logging.ClearProviders();
builder.Configuration.AddJsonFile(Path.GetFullPath(options["config"]), optional: false);
builder.WebHost.ConfigureKestrel(kestrel =>
{
    kestrel.AddServerHeader = false;
    kestrel.Limits.MaxRequestBodySize = null;
    kestrel.Listen(IPAddress.Loopback, int.Parse(options["h1"]), l => l.Protocols = HttpProtocols.Http1);
    kestrel.Listen(IPAddress.Loopback, int.Parse(options["h2c"]), l => l.Protocols = HttpProtocols.Http2);
    if (options.TryGetValue("tls", out var tls))
    {
        kestrel.Listen(IPAddress.Loopback, int.Parse(tls), l =>
        {
            l.Protocols = HttpProtocols.Http1AndHttp2;
            l.UseHttps(options["cert"]);
        });
    }
});
builder.Services.AddReverseProxy().LoadFromConfig(builder.Configuration.GetSection("ReverseProxy"));
var app = builder.Build();
app.MapReverseProxy();
app.Run();
