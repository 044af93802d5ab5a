using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Proxy.Demo.Grpc;
using Proxy.Demo.Sse;

namespace Proxy.Host;

/// <summary>
/// The demo backends the bundled config routes to, each a separate WebApplication on our server in this
/// process: an SSE service (GET /events, GET /) and the gRPC echo service of echo.proto on Grpc.AspNetCore (h2c).
/// </summary>
// Owned by ProxyHostApp: started before the proxy is built, stopped after it.
public sealed class DemoBackends : IAsyncDisposable
{
    /// <summary>The cluster whose destinations are pointed at the SSE backend.</summary>
    public const string SseClusterId = "demo-sse";

    /// <summary>The cluster whose destinations are pointed at the gRPC backend.</summary>
    public const string GrpcClusterId = "demo-grpc";

    private readonly List<WebApplication> _apps = [];

    private DemoBackends()
    {
    }

    /// <summary>The bound address of the SSE backend (HTTP/1.1 and h2c).</summary>
    public Uri SseAddress { get; private set; } = null!;

    /// <summary>The admin endpoint the demo page links to (set once it listens; null when it is off).</summary>
    public Uri? DashboardAddress { get; internal set; }

    /// <summary>The bound address of the gRPC echo backend (h2c).</summary>
    public Uri GrpcAddress { get; private set; } = null!;

    /// <summary>
    /// Starts both backends on the URLs of the <c>Demo</c> section (<c>SseUrl</c>, <c>GrpcUrl</c>; port 0
    /// picks a free port).
    /// </summary>
    public static async Task<DemoBackends> StartAsync(DemoOptions options, CancellationToken cancellationToken)
    {
        var demo = new DemoBackends();
        try
        {
            var sse = new SseOptions { Interval = options.SseInterval };
            demo.SseAddress = await demo.StartAppAsync(options.SseUrl, services: null, app =>
            {
                app.MapGet("/", () => Results.Content(DemoPage.Render(demo.DashboardAddress), "text/html; charset=utf-8"));
                app.MapServerSentEvents("/events", sse);
            }, cancellationToken);
            demo.GrpcAddress = await demo.StartAppAsync(options.GrpcUrl, services => services.AddEchoService(), app => app.MapEchoService(), cancellationToken);
            return demo;
        }
        catch
        {
            await demo.DisposeAsync();
            throw;
        }
    }

    /// <summary>
    /// Configuration keys that point every destination of the demo clusters at the bound backends, so
    /// port 0 (tests) and non-default ports work without editing the routes.
    /// </summary>
    public IEnumerable<KeyValuePair<string, string?>> DestinationOverrides(IConfiguration configuration, string section)
    {
        foreach (var (clusterId, address) in new[] { (SseClusterId, SseAddress), (GrpcClusterId, GrpcAddress) })
        {
            foreach (var destination in configuration.GetSection($"{section}:Clusters:{clusterId}:Destinations").GetChildren())
            {
                yield return new($"{destination.Path}:Address", address.ToString());
            }
        }
    }

    private async Task<Uri> StartAppAsync(string url, Action<IServiceCollection>? services, Action<WebApplication> map, CancellationToken cancellationToken)
    {
        // Args = []: the backends take nothing from the proxy's command line; only warnings reach the console.
        var builder = HostConfiguration.WithoutTreeWatch(() => WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [] }));
        builder.Logging.ClearProviders();
        builder.Logging.AddSimpleConsole(o => o.SingleLine = true).SetMinimumLevel(LogLevel.Warning)
            .AddFilter("Microsoft.Extensions.Hosting", LogLevel.None); // a failed start is reported once, by ProxyHostApp
        builder.WebHost.UseUrls(url);
        builder.WebHost.UseProxyServer();
        services?.Invoke(builder.Services);
        var app = builder.Build();
        map(app);
        _apps.Add(app);
        try
        {
            await app.StartAsync(cancellationToken);
        }
        catch (Exception ex) when (ex is IOException or Microsoft.AspNetCore.Connections.AddressInUseException or System.Net.Sockets.SocketException)
        {
            // Most likely the port is taken (another copy of the proxy, or a sample backend).
            throw new HostStartupException($"A demo backend could not listen on {url} ({ex.Message}). Stop what uses the port, or set Demo:SseUrl / Demo:GrpcUrl (port 0 picks a free one).", ex);
        }

        var bound = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First();
        return new Uri(bound.EndsWith('/') ? bound : bound + "/");
    }

    public async ValueTask DisposeAsync()
    {
        foreach (var app in Enumerable.Reverse(_apps))
        {
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(5));
            await app.StopAsync(timeout.Token);
            await app.DisposeAsync();
        }

        _apps.Clear();
    }
}

/// <summary>The <c>Demo</c> configuration section.</summary>
public sealed class DemoOptions
{
    /// <summary>Start the demo backends. True in the bundled proxy.json, false otherwise.</summary>
    public bool Enabled { get; set; }

    /// <summary>Where the SSE backend listens. Default http://127.0.0.1:5101.</summary>
    public string SseUrl { get; set; } = "http://127.0.0.1:5101";

    /// <summary>Where the gRPC echo backend listens (h2c). Default http://127.0.0.1:5102.</summary>
    public string GrpcUrl { get; set; } = "http://127.0.0.1:5102";

    /// <summary>Time between two events on /events. Default 1 s.</summary>
    public TimeSpan SseInterval { get; set; } = TimeSpan.FromSeconds(1);
}
