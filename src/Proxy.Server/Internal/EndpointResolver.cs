using System.Net.Sockets;
using Microsoft.Extensions.Logging;

namespace Proxy.Server.Internal;

/// <summary>Turns hosting URLs (--urls, ASPNETCORE_URLS) into endpoints, the way Kestrel reads them.</summary>
internal static class EndpointResolver
{
    public const string DefaultAddress = "http://localhost:5000";

    /// <summary>
    /// "http://127.0.0.1:0", "https://[::1]:5001", "http://localhost:5000" (loopback v4, plus v6
    /// added at bind time), "http://*:80" / "http://+:80" (all interfaces), other host names (all
    /// interfaces, with a warning, as Kestrel does).
    /// </summary>
    /// <remarks>
    /// Every error names the URL and where listen URLs come from, so a typo in <c>--urls</c> is a message
    /// rather than the <see cref="ArgumentOutOfRangeException"/> of an <see cref="IPEndPoint"/>.
    /// </remarks>
    /// <param name="source">Where the URL came from, for errors (the config key of an <c>Endpoints:{name}:Url</c>); null = the host's URLs.</param>
    public static ListenOptions Parse(string url, ILogger logger, string? source = null)
    {
        if (ListenUrl.FindProblem(url) is { } problem)
        {
            throw new InvalidOperationException($"{Describe(url, source)}: {problem}.");
        }

        var address = BindingAddress.Parse(url);
        if (address.IsUnixPipe || address.IsNamedPipe)
        {
            throw new NotSupportedException($"{Describe(url, source)}: Unix sockets and named pipes are not supported.");
        }
        var https = string.Equals(address.Scheme, "https", StringComparison.OrdinalIgnoreCase);
        if (!https && !string.Equals(address.Scheme, "http", StringComparison.OrdinalIgnoreCase))
        {
            throw new InvalidOperationException($"{Describe(url, source)}: only http and https URLs are supported.");
        }
        if (address.PathBase.Length > 0)
        {
            throw new InvalidOperationException($"{Describe(url, source)}: a path base is not supported in a listen URL; use UsePathBase.");
        }

        var host = address.Host;
        ListenOptions options;
        if (string.Equals(host, "localhost", StringComparison.OrdinalIgnoreCase))
        {
            options = new ListenOptions(new IPEndPoint(IPAddress.Loopback, address.Port)) { DisplayHost = "localhost" };
        }
        else if (host is "*" or "+" or "" or "0.0.0.0" or "[::]")
        {
            options = new ListenOptions(new IPEndPoint(host == "0.0.0.0" ? IPAddress.Any : AnyAddress(), address.Port));
        }
        else if (IPAddress.TryParse(host.Trim('[', ']'), out var ip))
        {
            options = new ListenOptions(new IPEndPoint(ip, address.Port));
        }
        else
        {
            ServerLog.BindingAnyForHostName(logger, host);
            options = new ListenOptions(new IPEndPoint(AnyAddress(), address.Port));
        }

        if (https)
        {
            options.UseHttps();
        }
        return options;
    }

    /// <summary>The URL and where it came from: the host's <c>urls</c> setting.</summary>
    private static string Describe(string url, string? source) =>
        source is null ? $"Listen URL '{url}' (from --urls, ASPNETCORE_URLS or the 'urls' setting)" : $"{source}: '{url}'";

    private static IPAddress AnyAddress() => Socket.OSSupportsIPv6 ? IPAddress.IPv6Any : IPAddress.Any;
}
