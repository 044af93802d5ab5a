using Microsoft.Extensions.Configuration.Memory;

namespace Proxy.Host;

/// <summary>Where the host's configuration comes from, in increasing precedence, and its console logging.</summary>
internal static class HostConfiguration
{
    /// <summary>The bundled default config, next to the executable.</summary>
    public const string BundledConfigFileName = "proxy.json";

    /// <summary>The command-line key naming a user's config file (<c>--config FILE</c>).</summary>
    public const string ConfigKey = "config";

    /// <summary>
    /// Sources, lowest precedence first: built-in logging defaults, appsettings*.json (current folder), the
    /// proxy config file (--config FILE, else the bundled proxy.json; reloaded on change), environment
    /// variables, the command line. Returns the proxy config file's full path.
    /// </summary>
    public static string Apply(WebApplicationBuilder builder, string[] args)
    {
        // Concise defaults that any file can override: requests and routing chatter stay out of the console.
        builder.Configuration.Sources.Insert(0, new MemoryConfigurationSource
        {
            InitialData = new Dictionary<string, string?>
            {
                ["Logging:LogLevel:Default"] = "Information",
                ["Logging:LogLevel:Microsoft.AspNetCore"] = "Warning",
                ["Logging:LogLevel:Microsoft.Hosting.Lifetime"] = "Warning",
                // A failed start is reported once, in one line, by ProxyHostApp.RunAsync.
                ["Logging:LogLevel:Microsoft.Extensions.Hosting"] = "Critical",
            },
        });

        var named = builder.Configuration[ConfigKey];
        var path = string.IsNullOrWhiteSpace(named)
            ? Path.Combine(AppContext.BaseDirectory, BundledConfigFileName)
            : Path.GetFullPath(named);
        if (!File.Exists(path))
        {
            throw new HostStartupException(string.IsNullOrWhiteSpace(named)
                ? $"The bundled config '{path}' is missing: rebuild the project, or pass --config FILE."
                : $"Config file '{path}' (from --config) does not exist.");
        }

        try
        {
            builder.Configuration.AddJsonFile(path, optional: false, reloadOnChange: true);
        }
        catch (InvalidDataException ex)
        {
            // A JSON syntax error: the innermost exception (from System.Text.Json) has the line and position.
            var cause = ex.GetBaseException();
            throw new HostStartupException($"Config file '{path}' is not valid JSON: {cause.Message}", ex);
        }

        // Re-added after the file so that they still win over it, as they do over appsettings.json.
        builder.Configuration.AddEnvironmentVariables();
        builder.Configuration.AddCommandLine(args);
        return path;
    }

    public static void ConfigureLogging(WebApplicationBuilder builder)
    {
        builder.Logging.ClearProviders();
        builder.Logging.AddSimpleConsole(options =>
        {
            options.SingleLine = true;
            options.TimestampFormat = "HH:mm:ss ";
        });
    }
}
