using Microsoft.Extensions.Configuration.Memory;
using Microsoft.Extensions.Logging.Console;
using Microsoft.Extensions.Options;

namespace Proxy.Host;

/// <summary>Where the host's configuration comes from, in increasing precedence, and its console logging.</summary>
internal static class HostConfiguration
{
    /// <summary>The bundled default config, next to the executable.</summary>
    public const string BundledConfigFileName = "proxy.json";

    /// <summary>The command-line key naming a user's config file (<c>--config FILE</c>).</summary>
    public const string ConfigKey = "config";

    /// <summary>The assembly metadata key that records the project folder at build time (see Proxy.Host.csproj).</summary>
    public const string ProjectDirectoryMetadataKey = "ProxyHostProjectDirectory";

    /// <summary>
    /// Sources, lowest precedence first: built-in logging defaults, appsettings*.json (current folder), the
    /// proxy config file (--config FILE, else the bundled proxy.json; reloaded on change, a failed reload
    /// reported to <paramref name="reloadLog"/>), environment variables, the command line. Returns the proxy
    /// config file's full path. <paramref name="treeWatchForced"/>: <see cref="CreateBuilder"/> turned off ASP.NET Core's
    /// watch of the content root's tree, and appsettings*.json get a watch of their folder here instead.
    /// </summary>
    public static string Apply(WebApplicationBuilder builder, bool treeWatchForced, string[] args, ConfigFileReloadLog reloadLog,
        ConfigFolders folders)
    {
        if (treeWatchForced)
        {
            WatchAppSettingsInTheirFolder(builder, folders, reloadLog);
        }

        // Concise defaults that any file can override: requests and routing chatter stay out of the console.
        builder.Configuration.Sources.Insert(0, new MemoryConfigurationSource
        {
            InitialData = new Dictionary<string, string?>
            {
                ["Logging:LogLevel:Default"] = "Information",
                ["Logging:LogLevel:Microsoft.AspNetCore"] = "Warning",
                ["Logging:LogLevel:Microsoft.Hosting.Lifetime"] = "Warning",
                // ASP.NET Core's hosting layer starts an Activity and a log scope for every request whenever this
                // category is on at any level, even when nothing would print them (its Information messages are
                // under the Warning above). Off, a proxied GET costs about 10% less CPU (README, "Runtime settings");
                // OTLP tracing still gets its server span, since a listener on the source starts it.
                ["Logging:LogLevel:Microsoft.AspNetCore.Hosting.Diagnostics"] = "None",
                // Enabled or not by AccessLog:Enabled; when on, it shows whatever the default level.
                ["Logging:LogLevel:Proxy.AccessLog"] = "Information",
                // A failed start is reported once, in one line, by ProxyHostApp.RunAsync.
                ["Logging:LogLevel:Microsoft.Extensions.Hosting"] = "Critical",
            },
        });

        var named = builder.Configuration[ConfigKey];
        var path = string.IsNullOrWhiteSpace(named)
            ? BundledConfigPath(AppContext.BaseDirectory, ProjectDirectory())
            : Path.GetFullPath(named);
        if (!File.Exists(path))
        {
            throw new HostStartupException(string.IsNullOrWhiteSpace(named)
                ? $"The bundled config '{path}' is missing: rebuild the project, or pass --config FILE."
                : $"Config file '{path}' (from --config) does not exist.");
        }

        try
        {
            // Watched in its own folder (that folder alone, not the tree under it), not under the content root.
            var source = new ConfigFileSource(reloadLog)
            {
                Path = System.IO.Path.GetFileName(path),
                FileProvider = folders.For(System.IO.Path.GetDirectoryName(path)!),
                Optional = false,
                ReloadOnChange = true,
            };
            ((IConfigurationBuilder)builder.Configuration).Add(source);
        }
        catch (InvalidDataException ex)
        {
            // A JSON syntax error: System.Text.Json's exception inside has the line and column.
            throw new HostStartupException($"Config file '{path}' is not valid JSON: {JsonErrors.Describe(ex)}", ex);
        }

        // Re-added after the file so that they still win over it, as they do over appsettings.json.
        builder.Configuration.AddEnvironmentVariables();
        builder.Configuration.AddCommandLine(args);
        return path;
    }

    // The host setting that makes WebApplication.CreateBuilder add appsettings*.json with reload on change, which watches
    // every folder under the content root. Read while the builder is made, from the DOTNET_ variables (which come after
    // the ASPNETCORE_ ones, so this one wins) and the command line.
    private const string DefaultReloadVariable = "DOTNET_hostBuilder__reloadConfigOnChange";
    private const string DefaultReloadKey = "hostBuilder:reloadConfigOnChange";
    private static readonly Lock BuilderLock = new();

    // NOTE: read once, before any builder is made: the variable this class sets for a moment is never taken for the user's.
    // Names compared ignoring case, as the configuration's environment source does.
    private static readonly bool UserSetDefaultReload = Environment.GetEnvironmentVariables().Keys.Cast<string>().Any(name =>
        name.Equals(DefaultReloadVariable, StringComparison.OrdinalIgnoreCase)
        || name.Equals("ASPNETCORE_hostBuilder__reloadConfigOnChange", StringComparison.OrdinalIgnoreCase));

    /// <summary>
    /// <c>WebApplication.CreateBuilder</c> without its watch of the content root's tree, unless the user set
    /// <c>hostBuilder:reloadConfigOnChange</c> (variable or command line): then as they said. True in
    /// <c>Forced</c> when this turned the watch off: <see cref="Apply"/> then watches appsettings*.json in their folder.
    /// </summary>
    public static (WebApplicationBuilder Builder, bool Forced) CreateBuilder(string[] args)
    {
        var options = new WebApplicationOptions { Args = args };
        if (UserSetDefaultReload || args.Any(a => a.Contains(DefaultReloadKey, StringComparison.OrdinalIgnoreCase)))
        {
            // Under the lock too: another host being built at this moment has the variable set to false for a while.
            lock (BuilderLock)
            {
                return (WebApplication.CreateBuilder(options), false);
            }
        }

        return (WithoutTreeWatch(() => WebApplication.CreateBuilder(options)), true);
    }

    /// <summary>
    /// A builder made by <paramref name="create"/> whose appsettings*.json sources do not reload on change, so it starts
    /// no watcher over the content root's tree: the host's own apps (admin endpoint, demo backends) read no settings of
    /// the user's, and <see cref="CreateBuilder"/> re-adds the proxy app's in <see cref="Apply"/>.
    /// </summary>
    public static WebApplicationBuilder WithoutTreeWatch(Func<WebApplicationBuilder> create)
    {
        // NOTE: set while the builder is made only (the only time it is read), under a lock: hosts built at once in one
        // process (tests) all get it, and processes started later do not inherit it. The user's value comes back after.
        lock (BuilderLock)
        {
            var previous = Environment.GetEnvironmentVariable(DefaultReloadVariable);
            Environment.SetEnvironmentVariable(DefaultReloadVariable, "false");
            try
            {
                return create();
            }
            finally
            {
                Environment.SetEnvironmentVariable(DefaultReloadVariable, previous);
            }
        }
    }

    /// <summary>
    /// appsettings.json and appsettings.{Environment}.json, which <see cref="CreateBuilder"/> added without reload,
    /// reloaded on change again, watched in the content root folder alone
    /// (<see cref="FolderFileProvider"/>: the default watcher takes every folder under the content root).
    /// </summary>
    private static void WatchAppSettingsInTheirFolder(WebApplicationBuilder builder, ConfigFolders folders, ConfigFileReloadLog reloadLog)
    {
        var sources = builder.Configuration.Sources;
        var names = new[] { "appsettings.json", $"appsettings.{builder.Environment.EnvironmentName}.json" };
        for (var i = 0; i < sources.Count; i++)
        {
            if (sources[i] is Microsoft.Extensions.Configuration.Json.JsonConfigurationSource { ReloadOnChange: false } json
                && json.Path is { } name && names.Contains(name, StringComparer.Ordinal))
            {
                // As the proxy config: a reload that cannot be read is reported and keeps the last good values.
                sources[i] = new ConfigFileSource(reloadLog)
                {
                    Path = name,
                    Optional = json.Optional,
                    ReloadOnChange = true,
                    FileProvider = folders.For(builder.Environment.ContentRootPath),
                };
            }
        }
    }

    /// <summary>
    /// The bundled proxy.json to use: the project's own src/Proxy.Host/proxy.json when the executable runs from that
    /// project's build output (<c>dotnet run</c>), so the file a user edits is the one watched; otherwise the copy next
    /// to the executable (a published or installed proxy, the tests).
    /// </summary>
    public static string BundledConfigPath(string baseDirectory, string? projectDirectory)
    {
        var besideExecutable = Path.Combine(baseDirectory, BundledConfigFileName);
        if (projectDirectory is null)
        {
            return besideExecutable;
        }

        var project = Path.TrimEndingDirectorySeparator(Path.GetFullPath(projectDirectory)) + Path.DirectorySeparatorChar;
        var source = Path.Combine(project, BundledConfigFileName);
        return Path.GetFullPath(baseDirectory).StartsWith(project, StringComparison.Ordinal) && File.Exists(source) ? source : besideExecutable;
    }

    private static string? ProjectDirectory() =>
        typeof(HostConfiguration).Assembly.GetCustomAttributes(typeof(System.Reflection.AssemblyMetadataAttribute), inherit: false)
            .Cast<System.Reflection.AssemblyMetadataAttribute>()
            .FirstOrDefault(a => a.Key == ProjectDirectoryMetadataKey)?.Value;

    /// <summary>
    /// The console logger, with the standard options: <c>Logging:Console:FormatterName</c> (simple, json, systemd) and
    /// <c>Logging:Console:FormatterOptions:*</c>. Without them: the simple formatter, one line per message, a short timestamp.
    /// </summary>
    public static void ConfigureLogging(WebApplicationBuilder builder)
    {
        // NOTE: AddSimpleConsole(...) would pin the formatter to "simple" after the configuration is read (its options
        // callback runs last), which is why json and systemd were ignored. Here the defaults run first instead: inserted
        // ahead of the configuration binding that WebApplication.CreateBuilder registered, so any configured value wins.
        // The formatter is named even by default: with no name, the console logger rebuilds the simple formatter's options
        // from its own obsolete properties and drops these defaults.
        // NOTE: a full queue drops messages rather than blocking the caller (the runtime's default waits): the direct path
        // and HTTP/1.1 requests log from the epoll threads, where a console nobody reads would stall every connection of
        // the thread. Logging:Console:QueueFullMode=Wait in the configuration restores the wait.
        builder.Services.Insert(0, ServiceDescriptor.Singleton<IConfigureOptions<ConsoleLoggerOptions>>(
            new ConfigureOptions<ConsoleLoggerOptions>(o =>
            {
                o.FormatterName = ConsoleFormatterNames.Simple;
                o.QueueFullMode = ConsoleLoggerQueueFullMode.DropWrite;
            })));
        builder.Services.Insert(0, ServiceDescriptor.Singleton<IConfigureOptions<SimpleConsoleFormatterOptions>>(
            new ConfigureOptions<SimpleConsoleFormatterOptions>(o =>
            {
                o.SingleLine = true;
                o.TimestampFormat = "HH:mm:ss ";
            })));
        builder.Logging.ClearProviders();
        builder.Logging.AddConsole();
    }
}
