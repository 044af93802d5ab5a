// The app of the comparison run (benchmarks/run-comparison.sh), the same on either server:
//   dotnet StaticApp.dll --server ours|kestrel --h1 PORT --h2c PORT --tls PORT --cert cert.pfx --static DIR
// Endpoints (all on 127.0.0.1):
//   GET  /size/{n}                 -> n bytes (0..1048576) of application/octet-stream, from a cached array
//   POST /echo                     -> the request body, echoed
//   POST /grpc.testing.BenchmarkService/UnaryCall -> one empty SimpleResponse + grpc-status 0 (a stand-in for
//                                     benchmarks/Proxy.Load's service when that is absent; ignores response_size)
//   POST /proxy.interop.Echo/Unary -> gRPC echo (src/Proxy.Demo's EchoService on Grpc.AspNetCore)
//   GET  /sse?n=&ms=               -> server-sent events: n events (default unbounded), one every ms milliseconds
//   GET  /static/*                 -> UseStaticFiles over --static DIR (the 10 MB file scenario)
//   GET  /gcstats                  -> "gen0 gen1 gen2 allocated-bytes" of this process (read before and after a run)
//   GET  /allocs?top=N             -> the N types allocated most since the previous call, from the runtime's
//                                     allocation sampling (one event per ~100 KB allocated; shares, not exact bytes)
// --h1 is HTTP/1.1 only, --h2c is HTTP/2 prior knowledge only, --tls is ALPN h2 + http/1.1; a port of 0 skips it.
// Logging is off apart from warnings. Not part of Proxy.sln: the script builds it on its own.
using System.Net;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.FileProviders;
using Proxy.Demo.Grpc;

var options = AppArgs.Parse(args);
var builder = WebApplication.CreateBuilder(new WebApplicationOptions { Args = [] });
builder.Logging.ClearProviders();
builder.Logging.AddConsole().SetMinimumLevel(LogLevel.Warning);
var certificate = options.CertPath is null ? null : X509CertificateLoader.LoadPkcs12FromFile(options.CertPath, password: null);
if (options.Tls != 0 && certificate is null)
{
    Console.Error.WriteLine("--tls needs --cert FILE.pfx");
    return 2;
}

if (options.Server == "kestrel")
{
    builder.WebHost.UseKestrel(k =>
    {
        k.AddServerHeader = false;
        k.Limits.MaxRequestBodySize = null;
        // As a backend behind a TLS-terminating proxy: accept the forwarded :scheme https over h2c (see
        // benchmarks/Proxy.Load/Server/BenchmarkServer.cs).
        k.AllowAlternateSchemes = true;
        if (options.H1 != 0)
        {
            k.Listen(IPAddress.Loopback, options.H1, l => l.Protocols = Microsoft.AspNetCore.Server.Kestrel.Core.HttpProtocols.Http1);
        }
        if (options.H2c != 0)
        {
            k.Listen(IPAddress.Loopback, options.H2c, l => l.Protocols = Microsoft.AspNetCore.Server.Kestrel.Core.HttpProtocols.Http2);
        }
        if (options.Tls != 0)
        {
            k.Listen(IPAddress.Loopback, options.Tls, l =>
            {
                l.Protocols = Microsoft.AspNetCore.Server.Kestrel.Core.HttpProtocols.Http1AndHttp2;
                l.UseHttps(certificate!);
            });
        }
    });
}
else if (options.Server == "ours")
{
    builder.WebHost.UseProxyServer(o =>
    {
        o.AddServerHeader = false;
        o.MaxRequestBodySize = null;
        o.AllowAlternateSchemes = true; // as on Kestrel above
        if (options.H1 != 0)
        {
            o.Listen(IPAddress.Loopback, options.H1, l => l.Protocols = Proxy.Server.HttpProtocols.Http1);
        }
        if (options.H2c != 0)
        {
            o.Listen(IPAddress.Loopback, options.H2c, l => l.Protocols = Proxy.Server.HttpProtocols.Http2);
        }
        if (options.Tls != 0)
        {
            o.Listen(IPAddress.Loopback, options.Tls, l => l.UseHttps(certificate!));
        }
    });
}
else
{
    Console.Error.WriteLine($"--server must be ours or kestrel, not '{options.Server}'");
    return 2;
}

builder.Services.AddEchoService();
var app = builder.Build();
if (options.StaticDir is not null)
{
    app.UseStaticFiles(new StaticFileOptions
    {
        FileProvider = new PhysicalFileProvider(Path.GetFullPath(options.StaticDir)),
        RequestPath = "/static",
        ServeUnknownFileTypes = true,
    });
}

var payloads = new Dictionary<int, byte[]>();
app.MapGet("/size/{n:int}", (int n, HttpContext context) =>
{
    if (n is < 0 or > 1 << 20)
    {
        return Task.FromResult(Results.BadRequest());
    }
    byte[] body;
    lock (payloads)
    {
        if (!payloads.TryGetValue(n, out body!))
        {
            body = new byte[n];
            Array.Fill(body, (byte)'x');
            payloads[n] = body;
        }
    }
    return Task.FromResult(Results.Bytes(body, "application/octet-stream"));
});

app.MapPost("/echo", async (HttpContext context) =>
{
    if (context.Request.ContentLength is long length)
    {
        context.Response.ContentLength = length;
    }
    context.Response.ContentType = "application/octet-stream";
    await context.Request.Body.CopyToAsync(context.Response.Body, context.RequestAborted);
});

byte[] emptyGrpcMessage = [0, 0, 0, 0, 0];
app.MapPost("/grpc.testing.BenchmarkService/UnaryCall", async (HttpContext context) =>
{
    await context.Request.Body.CopyToAsync(Stream.Null, context.RequestAborted);
    context.Response.ContentType = "application/grpc";
    await context.Response.Body.WriteAsync(emptyGrpcMessage, context.RequestAborted);
    context.Response.AppendTrailer("grpc-status", "0");
});

app.MapGet("/sse", async (HttpContext context, int? n, int? ms) =>
{
    var aborted = context.RequestAborted;
    context.Response.ContentType = "text/event-stream";
    context.Response.Headers.CacheControl = "no-cache";
    var delay = TimeSpan.FromMilliseconds(ms ?? 100);
    for (var id = 1; (n is null || id <= n) && !aborted.IsCancellationRequested; id++)
    {
        await context.Response.WriteAsync($"id: {id}\ndata: {{\"t\":{DateTimeOffset.UtcNow.ToUnixTimeMilliseconds()}}}\n\n", aborted);
        await context.Response.Body.FlushAsync(aborted);
        try
        {
            await Task.Delay(delay, aborted);
        }
        catch (OperationCanceledException)
        {
            break;
        }
    }
});

// Allocation and GC counters of this process, for per-request figures (read before and after a run).
app.MapGet("/gcstats", () => Results.Text(
    $"{GC.CollectionCount(0)} {GC.CollectionCount(1)} {GC.CollectionCount(2)} {GC.GetTotalAllocatedBytes(precise: true)}\n"));

var allocations = new AllocationSampler();
app.MapGet("/allocs", (int? top) => Results.Text(allocations.TakeReport(top ?? 25)));

app.MapEchoService();
await app.RunAsync();
return 0;

internal sealed record AppArgs(string Server, int H1, int H2c, int Tls, string? CertPath, string? StaticDir)
{
    public static AppArgs Parse(string[] args)
    {
        string server = "kestrel";
        int h1 = 0, h2c = 0, tls = 0;
        string? cert = null, staticDir = null;
        for (var i = 0; i + 1 < args.Length; i += 2)
        {
            var value = args[i + 1];
            switch (args[i])
            {
                case "--server": server = value; break;
                case "--h1": h1 = int.Parse(value); break;
                case "--h2c": h2c = int.Parse(value); break;
                case "--tls": tls = int.Parse(value); break;
                case "--cert": cert = value; break;
                case "--static": staticDir = value; break;
                default: throw new ArgumentException($"unknown option {args[i]}");
            }
        }
        return new AppArgs(server, h1, h2c, tls, cert, staticDir);
    }
}

/// <summary>
/// Listens to the runtime's GCAllocationTick events (GC keyword, verbose: one per ~100 KB allocated, naming the type
/// of the allocation that crossed the mark) and counts them per type: a sampled picture of what a run allocates.
/// </summary>
internal sealed class AllocationSampler : System.Diagnostics.Tracing.EventListener
{
    private readonly Dictionary<string, long> _bytes = new();

    protected override void OnEventSourceCreated(System.Diagnostics.Tracing.EventSource source)
    {
        if (source.Name == "Microsoft-Windows-DotNETRuntime")
        {
            EnableEvents(source, System.Diagnostics.Tracing.EventLevel.Verbose, (System.Diagnostics.Tracing.EventKeywords)0x1);
        }
    }

    protected override void OnEventWritten(System.Diagnostics.Tracing.EventWrittenEventArgs e)
    {
        if (e.EventName is not { } name || !name.StartsWith("GCAllocationTick", StringComparison.Ordinal) || e.PayloadNames is null)
        {
            return;
        }
        var type = e.Payload![e.PayloadNames.IndexOf("TypeName")] as string ?? "?";
        var amount = Convert.ToInt64(e.Payload[e.PayloadNames.IndexOf("AllocationAmount")]);
        lock (_bytes)
        {
            _bytes[type] = _bytes.GetValueOrDefault(type) + amount;
        }
    }

    public string TakeReport(int top)
    {
        lock (_bytes)
        {
            var total = Math.Max(1, _bytes.Values.Sum());
            var lines = _bytes.OrderByDescending(p => p.Value).Take(top)
                .Select(p => $"{100.0 * p.Value / total,6:F1}%  {p.Key}");
            var report = $"sampled {total} bytes\n" + string.Join("\n", lines) + "\n";
            _bytes.Clear();
            return report;
        }
    }
}
