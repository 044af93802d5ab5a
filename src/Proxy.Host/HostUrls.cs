using Microsoft.Extensions.Configuration.CommandLine;
using Microsoft.Extensions.Configuration.EnvironmentVariables;

namespace Proxy.Host;

/// <summary>
/// Checks the listen URLs the host will use (<c>urls</c>, and <c>Demo:SseUrl</c> / <c>Demo:GrpcUrl</c> when the
/// demo runs) before any server sees them, so a bad one is a message naming the value and where it was set,
/// on our server and on Kestrel alike (both would otherwise fail deep inside with an exception of their own).
/// </summary>
internal static class HostUrls
{
    /// <summary>Throws <see cref="HostStartupException"/> for the first URL that cannot be listened on.</summary>
    public static void Validate(IConfiguration configuration, bool demoEnabled)
    {
        if (configuration[WebHostDefaults.ServerUrlsKey] is { Length: > 0 } urls)
        {
            foreach (var url in urls.Split(';', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
            {
                Check(configuration, WebHostDefaults.ServerUrlsKey, url);
            }
        }

        if (demoEnabled)
        {
            foreach (var key in new[] { "Demo:SseUrl", "Demo:GrpcUrl" })
            {
                if (configuration[key] is { Length: > 0 } url)
                {
                    Check(configuration, key, url);
                }
            }
        }
    }

    private static void Check(IConfiguration configuration, string key, string url)
    {
        var problem = Proxy.Server.ListenUrl.FindProblem(url);
        if (problem is not null)
        {
            throw new HostStartupException($"{Source(configuration, key)} '{url}': {problem}.");
        }
    }

    /// <summary>How the user wrote the key: <c>--urls</c>, <c>ASPNETCORE_URLS</c>, or the key in a named file.</summary>
    private static string Source(IConfiguration configuration, string key)
    {
        if (configuration is IConfigurationRoot root)
        {
            foreach (var provider in root.Providers.Reverse())
            {
                if (!provider.TryGet(key, out _))
                {
                    continue;
                }

                return provider switch
                {
                    CommandLineConfigurationProvider => $"--{key}",
                    EnvironmentVariablesConfigurationProvider => key == WebHostDefaults.ServerUrlsKey ? "ASPNETCORE_URLS" : key.Replace(":", "__", StringComparison.Ordinal),
                    FileConfigurationProvider file => $"{key} (in {file.Source.FileProvider?.GetFileInfo(file.Source.Path ?? "").PhysicalPath ?? file.Source.Path})",
                    _ => key,
                };
            }
        }

        return key;
    }
}
