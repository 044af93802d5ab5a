// YARP as a peer in the comparison: the same ReverseProxy section as our proxy (benchmarks/peers/proxy.json), on
// Kestrel with one endpoint per protocol (Kestrel speaks h2c only on an HTTP/2-only endpoint).
//   dotnet YarpApp.dll --config proxy.json --h1 18080 --h2c 18081 --tls 18443 --cert cert.pfx
// Set up as YARP's own benchmark app (microsoft/reverse-proxy samples/BenchmarkApp, what aspnet/Benchmarks' proxy
// scenarios run): routing + MapReverseProxy, YARP's default transforms and nothing added, console logging at
// Warning, and backend HTTP/2 connections that may multiply (EnableMultipleHttp2Connections).
using System.Net;
using Microsoft.AspNetCore.Server.Kestrel.Core;

var options = args.Chunk(2).ToDictionary(p => p[0].TrimStart('-'), p => p[1]);
var builder = WebApplication.CreateSlimBuilder();
// Warnings and errors still show (in the comparison's log of this target), as for every .NET target of the run.
builder.Logging.ClearProviders();
builder.Logging.AddSimpleConsole();
builder.Logging.SetMinimumLevel(LogLevel.Warning);
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
builder.Services.AddReverseProxy()
    .LoadFromConfig(builder.Configuration.GetSection("ReverseProxy"))
    // YARP's default already; said here so a change of default cannot change the peer: past 100 streams on its h2c
    // backend connection YARP opens another instead of queueing, as aspnet/Benchmarks measures it.
    .ConfigureHttpClient((_, handler) => handler.EnableMultipleHttp2Connections = true);
var app = builder.Build();
app.MapReverseProxy();
app.Run();
