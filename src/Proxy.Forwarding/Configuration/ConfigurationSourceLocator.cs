using Microsoft.Extensions.Configuration;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// Finds which configuration source (a JSON file, the command line, environment variables) supplied a
/// key, so a validation message can say where to fix it: "ReverseProxy:Routes:r1:ClusterId: cluster 'x'
/// does not exist. (in /etc/proxy/proxy.json)".
/// </summary>
internal static class ConfigurationSourceLocator
{
    /// <summary>
    /// Appends the source of the message's key (the text before the first ": ") when one is found;
    /// otherwise returns the message unchanged.
    /// </summary>
    public static string Annotate(IConfigurationRoot root, string message)
    {
        var end = message.IndexOf(": ", StringComparison.Ordinal);
        if (end <= 0)
        {
            return message;
        }

        var source = FindSource(root, message[..end]);
        return source is null ? message : $"{message} (in {source})";
    }

    /// <summary>
    /// The source that supplied <paramref name="key"/> or, for a missing value ("is required"), the
    /// nearest parent the user wrote. Later providers win, as they do when the configuration is read.
    /// </summary>
    public static string? FindSource(IConfigurationRoot root, string key)
    {
        var providers = root.Providers.Reverse().ToList();
        for (var k = key; k.Length > 0; k = Parent(k))
        {
            foreach (var provider in providers)
            {
                if (provider.TryGet(k, out _) || provider.GetChildKeys([], k).Any())
                {
                    return Describe(provider);
                }
            }
        }

        return null;
    }

    private static string Parent(string key)
    {
        var colon = key.LastIndexOf(ConfigurationPath.KeyDelimiter, StringComparison.Ordinal);
        return colon < 0 ? "" : key[..colon];
    }

    private static string Describe(IConfigurationProvider provider) => provider switch
    {
        FileConfigurationProvider file => file.Source.FileProvider?.GetFileInfo(file.Source.Path ?? "").PhysicalPath
            ?? file.Source.Path ?? file.ToString(),
        Microsoft.Extensions.Configuration.CommandLine.CommandLineConfigurationProvider => "the command line",
        Microsoft.Extensions.Configuration.EnvironmentVariables.EnvironmentVariablesConfigurationProvider => "environment variables",
        Microsoft.Extensions.Configuration.Memory.MemoryConfigurationProvider => "in-memory configuration",
        _ => provider.ToString() ?? provider.GetType().Name,
    };
}
