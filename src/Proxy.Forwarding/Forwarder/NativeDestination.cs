using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// A destination prefix (<c>http://host:port/base/</c>) split once into what a native request head needs: the authority
/// and the base path the request path is appended to (as <see cref="Transforms.HttpTransformer.MakeDestinationAddress"/>
/// does for HttpClient, without building a Uri per request).
/// </summary>
internal sealed class NativeDestination
{
    private static readonly System.Collections.Concurrent.ConcurrentDictionary<string, NativeDestination> Cache = new(StringComparer.Ordinal);

    /// <summary>The parsed prefix, cached: destinations come from configuration, so the set is small (bounded at 1,024).</summary>
    public static NativeDestination For(string prefix)
    {
        if (Cache.TryGetValue(prefix, out var known))
        {
            return known;
        }

        var parsed = new NativeDestination(prefix);
        if (Cache.Count < 1024)
        {
            Cache.TryAdd(prefix, parsed);
        }

        return parsed;
    }

    private NativeDestination(string prefix)
    {
        Prefix = prefix;
        var schemeEnd = prefix.IndexOf("://", StringComparison.Ordinal);
        var rest = schemeEnd < 0 ? prefix : prefix[(schemeEnd + 3)..];
        var slash = rest.IndexOf('/');
        Authority = slash < 0 ? rest : rest[..slash];
        var basePath = slash < 0 ? "" : rest[slash..];
        BasePath = basePath.EndsWith('/') ? basePath[..^1] : basePath;
    }

    public string Prefix { get; }

    /// <summary>host[:port] of the destination.</summary>
    public string Authority { get; }

    /// <summary>The prefix's path without its trailing slash ("" for none).</summary>
    public string BasePath { get; }

    /// <summary>The origin-form target: base path, request path (or "/"), query.</summary>
    public string Target(PathString path, QueryString query)
    {
        var pathText = path.HasValue ? path.ToUriComponent() : "/";
        var queryText = query.HasValue ? query.ToUriComponent() : "";
        return BasePath.Length == 0 && queryText.Length == 0 ? pathText : string.Concat(BasePath, pathText, queryText);
    }
}
