using System.Text.Json;
using Microsoft.Extensions.Configuration.Json;

namespace Proxy.Host;

/// <summary>
/// The proxy config file (and appsettings*.json, when the host watches them) as a configuration source: JSON, reloaded
/// on change, and a reload that cannot be read
/// (invalid JSON, half-written by an editor) is reported through <see cref="ConfigFileReloadLog"/> and keeps the
/// values of the last good read.
/// </summary>
/// <remarks>
/// NOTE: a plain <c>AddJsonFile(reloadOnChange: true)</c> throws such an error on the file watcher's thread, where
/// nobody sees it, and clears the file's values first; the next reload of any other source would then see an empty
/// <c>ReverseProxy</c> section. Swallowing the error inside <see cref="JsonConfigurationProvider.Load(Stream)"/>
/// keeps the old values, and the reload the watcher then signals re-applies an unchanged config.
/// </remarks>
internal sealed class ConfigFileSource(ConfigFileReloadLog log) : JsonConfigurationSource
{
    public override IConfigurationProvider Build(IConfigurationBuilder builder)
    {
        EnsureDefaults(builder);
        return new Provider(this, log);
    }

    // Owned by the configuration system: Load runs once at startup, then on the file watcher's thread per change.
    private sealed class Provider(ConfigFileSource source, ConfigFileReloadLog log) : JsonConfigurationProvider(source)
    {
        private bool _loaded;

        public override void Load(Stream stream)
        {
            try
            {
                base.Load(stream);
                _loaded = true;
            }
            catch (Exception ex) when (_loaded)
            {
                // A reload: the first load's error stops startup instead (HostConfiguration reports it).
                var path = source.FileProvider?.GetFileInfo(source.Path ?? "").PhysicalPath ?? source.Path ?? "";
                log.ReloadFailed(path, JsonErrors.Describe(ex));
            }
        }
    }
}

/// <summary>Where a failed reload of the config file is reported: the host's logger once it exists, stderr before.</summary>
// Shared by the configuration provider (file watcher thread) and ProxyHostApp (sets Logger once, after Build).
internal sealed class ConfigFileReloadLog
{
    private volatile ILogger? _logger;

    public ILogger? Logger
    {
        get => _logger;
        set => _logger = value;
    }

    public void ReloadFailed(string path, string reason)
    {
        if (_logger is { } logger)
        {
            HostLog.ConfigReloadFailed(logger, path, reason);
        }
        else
        {
            Console.Error.WriteLine($"Config file '{path}' was not reloaded: {reason}; the last good configuration stays in use.");
        }
    }
}

/// <summary>JSON errors as a person counts: line and column from 1 (System.Text.Json counts both from 0).</summary>
internal static class JsonErrors
{
    /// <summary>"line 3, column 5: '}' is an invalid start of a value." for a JSON syntax error anywhere in the chain.</summary>
    public static string Describe(Exception exception)
    {
        for (var e = exception; e is not null; e = e.InnerException)
        {
            if (e is JsonException { LineNumber: { } line } json)
            {
                // Its message ends with " LineNumber: 2 | BytePositionInLine: 4." (0-based): replaced by our 1-based prefix.
                var message = json.Message;
                var cut = message.IndexOf(" LineNumber:", StringComparison.Ordinal);
                if (cut > 0)
                {
                    message = message[..cut];
                }

                // NOTE: the column counts bytes of UTF-8, which is characters on the ASCII a config is mostly made of.
                return $"line {line + 1}, column {(json.BytePositionInLine ?? 0) + 1}: {message}";
            }
        }

        return exception.GetBaseException().Message;
    }
}
