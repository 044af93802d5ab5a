using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// A destination prefix (<c>http://host:port/base/</c>) split once into what a native request head needs: the authority
/// and the base path the request path is appended to (as <see cref="Transforms.HttpTransformer.MakeDestinationAddress"/>
/// does for HttpClient, without building a Uri per request).
/// </summary>
internal readonly struct NativeDestination
{
    public NativeDestination(string prefix)
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
