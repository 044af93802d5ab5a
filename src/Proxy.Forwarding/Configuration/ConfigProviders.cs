using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Primitives;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding.Configuration;

/// <summary>A source of configuration snapshots that can signal when a new one is available.</summary>
public interface IProxyConfigProvider
{
    /// <summary>
    /// The key prefix used in validation messages (<c>ReverseProxy</c> for the usual section).
    /// </summary>
    string Name { get; }

    /// <summary>
    /// Reads the current snapshot. Parse problems (a value that is not a TimeSpan, ...) are added
    /// to <paramref name="errors"/> with their key; the snapshot is validated by the caller.
    /// </summary>
    ProxyConfig GetConfig(List<string> errors);

    /// <summary>A token that fires when <see cref="GetConfig"/> would return something new.</summary>
    IChangeToken GetChangeToken();
}

/// <summary>
/// Reads YARP's JSON schema from an <see cref="IConfiguration"/> section; reloads with it. With the
/// configuration root the section came from, messages also name the file (or other source) of each key.
/// </summary>
internal sealed class ConfigurationConfigProvider(IConfiguration section, IConfigurationRoot? root = null, ILogger? logger = null) : IProxyConfigProvider
{
    public string Name { get; } = section is IConfigurationSection s ? s.Path : "ReverseProxy";

    public ProxyConfig GetConfig(List<string> errors)
    {
        var warnings = new List<string>();
        var config = ConfigurationReader.Read(section, errors, warnings);
        foreach (var warning in warnings)
        {
            Log.ConfigKeyIgnored(logger ?? NullLogger.Instance, DescribeSource(warning));
        }

        return config;
    }

    /// <summary>Adds where the message's key came from ("(in /etc/proxy/proxy.json)") when that is known.</summary>
    public string DescribeSource(string message) =>
        root is null ? message : ConfigurationSourceLocator.Annotate(root, message);

    public IChangeToken GetChangeToken() => section.GetReloadToken();
}

/// <summary>
/// A configuration held in memory, replaced as a whole with <see cref="Update"/>.
/// </summary>
// Owned by its callers: Update swaps one immutable snapshot reference, readers see old or new, never a mix.
public sealed class InMemoryConfigProvider : IProxyConfigProvider
{
    private volatile Snapshot _current;

    /// <summary>Creates the provider with an initial snapshot.</summary>
    public InMemoryConfigProvider(IReadOnlyList<RouteConfig> routes, IReadOnlyList<ClusterConfig> clusters)
    {
        _current = new Snapshot(new ProxyConfig(routes, clusters));
    }

    /// <inheritdoc />
    public string Name => "InMemory";

    /// <inheritdoc />
    public ProxyConfig GetConfig(List<string> errors) => _current.Config;

    /// <inheritdoc />
    public IChangeToken GetChangeToken() => _current.ChangeToken;

    /// <summary>Replaces the whole configuration; the proxy picks it up (or logs why not) at once.</summary>
    public void Update(IReadOnlyList<RouteConfig> routes, IReadOnlyList<ClusterConfig> clusters)
    {
        var previous = Interlocked.Exchange(ref _current, new Snapshot(new ProxyConfig(routes, clusters)));
        previous.Signal();
    }

    private sealed class Snapshot(ProxyConfig config)
    {
        private readonly CancellationTokenSource _cts = new();

        public ProxyConfig Config { get; } = config;

        public IChangeToken ChangeToken => new CancellationChangeToken(_cts.Token);

        public void Signal() => _cts.Cancel();
    }
}
