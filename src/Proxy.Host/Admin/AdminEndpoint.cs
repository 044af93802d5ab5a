using System.Diagnostics.Metrics;
using System.Security.Cryptography;
using System.Text;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http.Features;
using OpenTelemetry.Metrics;
using Proxy.Forwarding.Configuration;
using Proxy.Server;

namespace Proxy.Host.Admin;

/// <summary>
/// The admin endpoint: a small WebApplication of its own, on the same kind of server as the proxy (<c>Host:Server</c>),
/// listening on <c>Admin:Url</c> and reading the proxy app's services (config state, meters, lifetime).
/// </summary>
/// <remarks>
/// NOTE: a second app rather than a second listener of the proxy app: host filtering (RequireHost("*:9901")) matches
/// the Host header, which any client of the public port can set, and the proxy's catch-all routes and middleware would
/// also answer on the admin port. Two apps keep both pipelines apart by construction, for the price of a few objects.
/// </remarks>
// Owned by ProxyHostApp: built after the proxy app, started after it, stopped before it.
internal sealed class AdminEndpoint : IAsyncDisposable
{
    private readonly WebApplication _app;
    private readonly MetricsAggregator _metrics;
    private readonly DashboardFeed _feed;

    private AdminEndpoint(WebApplication app, AdminOptions options, MetricsAggregator metrics, DashboardFeed feed)
    {
        _app = app;
        Options = options;
        _metrics = metrics;
        _feed = feed;
    }

    public AdminOptions Options { get; }

    /// <summary>The bound address (after <see cref="StartAsync"/>).</summary>
    public Uri Address => new(_app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First());

    public static AdminEndpoint Build(AdminOptions options, WebApplication proxy, ProxyHostServer server)
    {
        var builder = HostConfiguration.WithoutTreeWatch(() => WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [] }));
        // Nothing from the proxy's files, environment or command line: ASPNETCORE_URLS or Kestrel:Endpoints would otherwise
        // put this app on the proxy's ports. Only where the development certificate lives (an https admin URL).
        builder.Configuration.Sources.Clear();
        var certificateKey = $"{ProxyServerWebHostBuilderExtensions.ConfigurationSectionName}:{nameof(ProxyServerOptions.DevelopmentCertificateDirectory)}";
        builder.Configuration.AddInMemoryCollection([new(certificateKey, proxy.Configuration[certificateKey])]);
        builder.Logging.ClearProviders();
        builder.Services.AddSingleton(proxy.Services.GetRequiredService<ILoggerFactory>()); // the proxy's console, filters and all
        builder.WebHost.UseUrls(options.Url);
        if (server == ProxyHostServer.Kestrel)
        {
            builder.WebHost.UseKestrelHttpsConfiguration(); // the slim builder leaves https URLs out
        }

        HostServer.Use(builder, server);
        var app = builder.Build();
        // Scrapes and dashboards are not traffic: keep them out of http.server.request.duration (the proxy's requests).
        app.Use((context, next) =>
        {
            if (context.Features.Get<IHttpMetricsTagsFeature>() is { } metricsTags)
            {
                metricsTags.MetricsDisabled = true;
            }

            return next(context);
        });
        if (!string.IsNullOrEmpty(options.Token))
        {
            app.Use(RequireToken(Encoding.UTF8.GetBytes(options.Token)));
        }

        // Built before the proxy starts, so its gauges count every connection and stream from the first one.
        var metrics = new MetricsAggregator(proxy.Services.GetRequiredService<IMeterFactory>(), DashboardFeed.InstrumentsRead);
        var feed = new DashboardFeed(metrics, proxy.Services.GetRequiredService<IProxyStateLookup>(), TimeProvider.System);
        Map(app, proxy.Services);
        Dashboard.Map(app, feed);
        return new AdminEndpoint(app, options, metrics, feed);
    }

    private static void Map(WebApplication app, IServiceProvider proxy)
    {
        app.MapGet("/healthz", () => Results.Text("ok\n"));
        app.MapGet("/readyz", () =>
        {
            var reasons = Readiness.Check(proxy);
            return Results.Json(new { ready = reasons.Count == 0, reasons }, statusCode: reasons.Count == 0 ? 200 : 503);
        });
        app.MapGet("/config", () => Results.Text(ConfigDump.Render(proxy.GetRequiredService<IProxyStateLookup>()), "application/json"));
        // The provider exists when the admin endpoint is on (HostTelemetry adds the Prometheus reader for it).
        app.MapPrometheusScrapingEndpoint("/metrics", proxy.GetRequiredService<MeterProvider>(), configureBranchedPipeline: null, optionsName: null);
    }

    /// <summary>Every admin request carries the token: <c>Authorization: Bearer TOKEN</c>, or <c>access_token</c> in the query (RFC 6750 §2.3) for a browser's page and EventSource, which cannot set headers.</summary>
    private static Func<HttpContext, RequestDelegate, Task> RequireToken(byte[] token) => (context, next) =>
    {
        var header = context.Request.Headers.Authorization.ToString();
        var presented = header.StartsWith("Bearer ", StringComparison.OrdinalIgnoreCase)
            ? header["Bearer ".Length..].Trim()
            : context.Request.Query["access_token"].ToString();
        if (CryptographicOperations.FixedTimeEquals(Encoding.UTF8.GetBytes(presented), token))
        {
            return next(context);
        }

        context.Response.StatusCode = StatusCodes.Status401Unauthorized;
        context.Response.Headers.WWWAuthenticate = "Bearer realm=\"proxy admin\"";
        return context.Response.WriteAsync("The admin endpoint needs its token (Admin:Token): send 'Authorization: Bearer TOKEN'.\n");
    };

    public Task StartAsync(CancellationToken cancellationToken) => _app.StartAsync(cancellationToken);

    public async ValueTask DisposeAsync()
    {
        try
        {
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(5));
            await _app.StopAsync(timeout.Token);
        }
        finally
        {
            await _app.DisposeAsync();
            _feed.Dispose();
            _metrics.Dispose();
        }
    }
}
