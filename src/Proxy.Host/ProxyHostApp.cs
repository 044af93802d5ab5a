using System.Diagnostics;
using System.Runtime.InteropServices;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Options;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Proxy.Forwarding;
using Proxy.Forwarding.Configuration;
using Proxy.Host.AccessLog;
using Proxy.Host.Admin;
using Proxy.Relay;

namespace Proxy.Host;

/// <summary>
/// The standalone proxy: our server (https://127.0.0.1:8443 with h2 + http/1.1, http://127.0.0.1:8080 with
/// HTTP/1.1 + h2c), or Kestrel with <c>Host:Server=kestrel</c>, the forwarding library reading <c>ReverseProxy</c>
/// from the bundled proxy.json or from <c>--config FILE</c>, and the demo backends when <c>Demo:Enabled</c>.
/// Tests build it with port 0 everywhere.
/// </summary>
// Owned by its creator (Program or a test): BuildAsync, StartAsync, then DisposeAsync, in that order.
public sealed class ProxyHostApp : IAsyncDisposable
{
    /// <summary>The configuration section of routes and clusters (YARP's schema).</summary>
    public const string ReverseProxySection = "ReverseProxy";

    /// <summary>Used when neither --urls, ASPNETCORE_URLS nor a <c>Urls</c> key says otherwise.</summary>
    public static readonly string[] DefaultUrls = ["https://127.0.0.1:8443", "http://127.0.0.1:8080"];

    private readonly ConfigFolders _configFolders;

    private ProxyHostApp(WebApplication app, ProxyHostServer server, DemoBackends? demo, string configFile, AdminEndpoint? admin,
        ConfigFolders configFolders)
    {
        _configFolders = configFolders;
        App = app;
        Admin = admin;
        Server = server;
        Demo = demo;
        ConfigFile = configFile;
    }

    /// <summary>The proxy app.</summary>
    public WebApplication App { get; }

    /// <summary>The server the proxy app runs on (<c>Host:Server</c>).</summary>
    public ProxyHostServer Server { get; }

    /// <summary>The demo backends, or null when <c>Demo:Enabled</c> is false.</summary>
    public DemoBackends? Demo { get; }

    /// <summary>The admin endpoint (health, metrics, config, dashboard), or null when <c>Admin:Enabled</c> is false.</summary>
    internal AdminEndpoint? Admin { get; }

    /// <summary>The full path of the JSON config in use: --config FILE, or the bundled proxy.json.</summary>
    public string ConfigFile { get; }

    /// <summary>The proxy's bound addresses (after <see cref="StartAsync"/>), e.g. https://127.0.0.1:8443.</summary>
    public IReadOnlyList<Uri> Addresses =>
        App.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Select(a => new Uri(a)).ToList();

    /// <summary>
    /// Builds the proxy from <paramref name="args"/> (starting the demo backends first when enabled, so
    /// the routes can point at their bound ports). Throws <see cref="ProxyConfigException"/> for an invalid
    /// ReverseProxy section and <see cref="HostStartupException"/> for a missing or unreadable config file.
    /// </summary>
    public static Task<ProxyHostApp> BuildAsync(string[] args, CancellationToken cancellationToken = default)
        => BuildAsync(args, configure: null, cancellationToken);

    /// <summary>Test hook: <paramref name="configure"/> sees the builder after the host's own logging setup (to add a log capture).</summary>
    internal static async Task<ProxyHostApp> BuildAsync(string[] args, Action<WebApplicationBuilder>? configure, CancellationToken cancellationToken)
    {
        var folders = new ConfigFolders();
        try
        {
            return await BuildAsync(args, configure, folders, cancellationToken);
        }
        catch
        {
            folders.Dispose(); // the config files' watchers: a failed start (a test, a retry) must not keep them
            throw;
        }
    }

    private static async Task<ProxyHostApp> BuildAsync(string[] args, Action<WebApplicationBuilder>? configure, ConfigFolders folders,
        CancellationToken cancellationToken)
    {
        var (builder, treeWatchForced) = HostConfiguration.CreateBuilder(args);
        var reloadLog = new ConfigFileReloadLog();
        var configFile = HostConfiguration.Apply(builder, treeWatchForced, args, reloadLog, folders);

        HostConfiguration.ConfigureLogging(builder);
        configure?.Invoke(builder);
        var server = HostServer.Read(builder.Configuration);
        // Kestrel:Endpoints and ProxyServer:Endpoints replace the URLs (the server would warn that it overrides the default ones).
        if (string.IsNullOrEmpty(builder.Configuration[WebHostDefaults.ServerUrlsKey])
            && !HostServer.HasConfiguredEndpoints(builder.Configuration, server))
        {
            builder.WebHost.UseUrls(DefaultUrls);
        }

        HostServer.Use(builder, server);
        HostServer.ValidateEpollThreads(builder.Configuration, configFile);
        var adminOptions = AdminOptions.Read(builder.Configuration);
        HostTelemetry.Add(builder, prometheus: adminOptions is not null);

        var demoOptions = builder.Configuration.GetSection("Demo").Get<DemoOptions>() ?? new DemoOptions();
        HostUrls.Validate(builder.Configuration, demoOptions.Enabled);
        DemoBackends? demo = null;
        try
        {
            if (demoOptions.Enabled)
            {
                demo = await DemoBackends.StartAsync(demoOptions, cancellationToken);
                builder.Configuration.AddInMemoryCollection(demo.DestinationOverrides(builder.Configuration, ReverseProxySection).ToList());
            }

            // The native relay: the default transport on our server; on Kestrel clusters opt in with "Transport": "Native".
            builder.Services.AddProxyForwarding().LoadFromConfig(builder.Configuration.GetSection(ReverseProxySection)).AddNativeRelay();
            var accessLog = builder.Configuration.GetSection(AccessLogOptions.Section).Get<AccessLogOptions>()?.Enabled == true;
            if (DirectPathOptions.Read(builder.Configuration, server, configFile))
            {
                builder.Services.AddDirectPath();
                if (accessLog)
                {
                    // Direct requests skip the access log middleware: the direct path reports them to the same log.
                    builder.Services.AddSingleton<Proxy.Relay.Direct.IDirectRequestObserver, DirectAccessLog>();
                }
            }

            var app = builder.Build();
            if (accessLog)
            {
                app.UseMiddleware<AccessLogMiddleware>(); // ahead of the proxy endpoints, so it sees each request end
            }

            reloadLog.Logger = app.Services.GetRequiredService<ILoggerFactory>().CreateLogger("Proxy.Host");
            app.MapProxyForwarding(); // Loads and validates the config: a bad one throws here, before any port is bound.
            var admin = adminOptions is null ? null : AdminEndpoint.Build(adminOptions, app, server);
            return new ProxyHostApp(app, server, demo, configFile, admin, folders);
        }
        catch
        {
            if (demo is not null)
            {
                await demo.DisposeAsync();
            }

            throw;
        }
    }

    /// <summary>Builds and starts the proxy; the returned host is serving.</summary>
    public static Task<ProxyHostApp> StartAsync(string[] args, CancellationToken cancellationToken = default)
        => StartAsync(args, configure: null, cancellationToken);

    /// <summary>Test hook: see <see cref="BuildAsync(string[], Action{WebApplicationBuilder}?, CancellationToken)"/>.</summary>
    internal static async Task<ProxyHostApp> StartAsync(string[] args, Action<WebApplicationBuilder>? configure, CancellationToken cancellationToken)
    {
        var host = await BuildAsync(args, configure, cancellationToken);
        try
        {
            await host.App.StartAsync(cancellationToken);
        }
        catch (Exception ex) when (ex is IOException or Microsoft.AspNetCore.Connections.AddressInUseException or System.Net.Sockets.SocketException)
        {
            var section = host.Server == ProxyHostServer.Kestrel ? HostServer.KestrelSection : ProxyServerWebHostBuilderExtensions.ConfigurationSectionName;
            var (where, fix) = HostServer.HasConfiguredEndpoints(host.App.Configuration, host.Server)
                ? ($"its {section}:Endpoints", $"change {section}:Endpoints")
                : (host.App.Configuration[WebHostDefaults.ServerUrlsKey] is { Length: > 0 } configured ? configured : string.Join(";", DefaultUrls), "pass --urls");
            await host.DisposeAsync();
            throw new HostStartupException($"The proxy could not listen on {where} ({ex.Message}). Stop what uses the port, or {fix}.", ex);
        }
        catch
        {
            await host.DisposeAsync();
            throw;
        }

        try
        {
            if (host.Admin is { } admin)
            {
                await admin.StartAsync(cancellationToken);
                if (host.Demo is not null)
                {
                    host.Demo.DashboardAddress = admin.Address;
                }
            }
        }
        catch (Exception ex) when (ex is IOException or Microsoft.AspNetCore.Connections.AddressInUseException or System.Net.Sockets.SocketException)
        {
            var url = host.Admin!.Options.Url;
            await host.DisposeAsync();
            throw new HostStartupException($"The admin endpoint could not listen on {url} ({ex.Message}). Stop what uses the port, set Admin:Url (port 0 picks a free one), or set Admin:Enabled=false.", ex);
        }
        catch
        {
            await host.DisposeAsync();
            throw;
        }

        host.LogStarted();
        return host;
    }

    /// <summary>
    /// The command-line entry point: runs until Ctrl+C. Returns 0 after a clean shutdown, 1 when startup
    /// failed (the reason, e.g. every invalid config key with its file, goes to <paramref name="error"/>).
    /// </summary>
    public static async Task<int> RunAsync(string[] args, TextWriter? error = null, CancellationToken cancellationToken = default)
    {
        error ??= Console.Error;
        ProxyHostApp host;
        try
        {
            host = await StartAsync(args, cancellationToken);
        }
        catch (Exception ex) when (ex is ProxyConfigException or HostStartupException)
        {
            await error.WriteLineAsync(ex.Message);
            return 1;
        }
        catch (Exception ex) when (ex is not OperationCanceledException)
        {
            // Port in use, unreadable certificate, ...: one line that says what, not a stack trace.
            await error.WriteLineAsync($"Proxy startup failed: {ex.GetType().Name}: {ex.Message}");
            return 1;
        }

        await using (host)
        {
            await host.WaitForStopSignalAsync(cancellationToken);
            await host.StopGracefullyAsync();
        }

        return 0;
    }

    /// <summary>Completes when the host is asked to stop: Ctrl+C, SIGTERM, StopApplication, or <paramref name="cancellationToken"/>.</summary>
    private async Task WaitForStopSignalAsync(CancellationToken cancellationToken)
    {
        var stopping = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using (App.Lifetime.ApplicationStopping.Register(() => stopping.TrySetResult()))
        using (cancellationToken.Register(App.Lifetime.StopApplication))
        {
            await stopping.Task;
        }
    }

    /// <summary>
    /// The graceful stop after the first signal: open requests get the host's shutdown timeout to finish (event streams
    /// end at once: the forwarder ends them on ApplicationStopping), and says so. A second Ctrl+C or SIGTERM cancels the
    /// wait: the remaining connections are aborted and the process exits.
    /// </summary>
    private async Task StopGracefullyAsync()
    {
        using var now = new CancellationTokenSource();
        // NOTE: the console lifetime already handles these signals, and for every one only asks the host to stop, which
        // it is doing: a second Ctrl+C would change nothing. These registrations are added after the first signal, so any
        // signal they see is the second.
        var registrations = new List<PosixSignalRegistration>();
        foreach (var signal in new[] { PosixSignal.SIGINT, PosixSignal.SIGTERM, PosixSignal.SIGQUIT })
        {
            try
            {
                registrations.Add(PosixSignalRegistration.Create(signal, context =>
                {
                    context.Cancel = true; // the process ends when the stop below returns, with the connections aborted
                    now.Cancel();
                }));
            }
            catch (PlatformNotSupportedException)
            {
                // SIGQUIT on Windows: Ctrl+C and SIGTERM still work.
            }
        }

        try
        {
            var logger = App.Services.GetRequiredService<ILoggerFactory>().CreateLogger("Proxy.Host");
            var timeout = App.Services.GetRequiredService<IOptions<HostOptions>>().Value.ShutdownTimeout;
            HostLog.Stopping(logger, timeout);
            var started = Stopwatch.GetTimestamp();
            await App.StopAsync(now.Token);
            if (now.IsCancellationRequested)
            {
                HostLog.StoppedAtOnce(logger, Stopwatch.GetElapsedTime(started));
            }
            else
            {
                HostLog.Stopped(logger, Stopwatch.GetElapsedTime(started));
            }
        }
        finally
        {
            registrations.ForEach(r => r.Dispose());
        }
    }

    private void LogStarted()
    {
        var logger = App.Services.GetRequiredService<ILoggerFactory>().CreateLogger("Proxy.Host");
        var addresses = Addresses;
        HostLog.Listening(logger, string.Join(", ", addresses), Server, ConfigFile);
        HostLog.SocketCompletions(logger, SocketEngineDefaults.CompletionMode());
        if (App.Services.GetService<IServer>() is Proxy.Server.ProxyServer)
        {
            var sockets = App.Services.GetRequiredService<IOptions<Proxy.Server.ProxyServerOptions>>().Value.Sockets;
            var engine = sockets.Engine;
            var threads = sockets.EpollThreads > 0 ? sockets.EpollThreads : Environment.ProcessorCount;
            HostLog.SocketEngine(logger, engine, engine == Proxy.Transport.Sockets.SocketEngine.Epoll
                ? $": ours, {threads} threads (ProxyServer:Sockets:EpollThreads), the proxy's and its backends' sockets; completions run inline on them"
                : sockets.EpollThreads > 0
                    ? $": the runtime's (ProxyServer:Sockets:EpollThreads={sockets.EpollThreads} applies to the Epoll engine only)"
                    : ": the runtime's");
        }
        if (Admin is not null)
        {
            HostLog.AdminListening(logger, Admin.Address);
        }
        if (Demo is not null)
        {
            HostLog.DemoStarted(logger, Demo.SseAddress, Demo.GrpcAddress);
            var https = addresses.FirstOrDefault(a => a.Scheme == Uri.UriSchemeHttps);
            if (https is not null)
            {
                HostLog.TryIt(logger, $"curl -k -N {https.GetLeftPart(UriPartial.Authority)}/events");
            }
        }
    }

    public async ValueTask DisposeAsync()
    {
        try
        {
            if (Admin is not null)
            {
                await Admin.DisposeAsync();
            }

            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(5));
            await App.StopAsync(timeout.Token);
        }
        finally
        {
            try
            {
                await App.DisposeAsync();
            }
            finally
            {
                _configFolders.Dispose();
                if (Demo is not null)
                {
                    await Demo.DisposeAsync();
                }
            }
        }
    }
}

/// <summary>A startup problem the user fixes (a missing or malformed config file); its message says how.</summary>
public sealed class HostStartupException(string message, Exception? inner = null) : Exception(message, inner);
