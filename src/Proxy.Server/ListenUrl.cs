namespace Proxy.Server;

/// <summary>
/// Checks a listen URL (<c>--urls</c>, <c>ASPNETCORE_URLS</c>) the way the server will read it, so that a typo is a
/// sentence naming the value instead of an exception from deep inside binding.
/// </summary>
public static class ListenUrl
{
    /// <summary>What is wrong with <paramref name="url"/> as a listen URL ("port 70000 is out of range (0-65535)"), or null.</summary>
    public static string? FindProblem(string url)
    {
        ArgumentNullException.ThrowIfNull(url);
        BindingAddress address;
        try
        {
            address = BindingAddress.Parse(url);
        }
        catch (FormatException ex)
        {
            return $"not a valid URL ({ex.Message})";
        }

        // NOTE: BindingAddress takes a port that is not a number for part of the host ("127.0.0.1:sse" on port 80), and
        // the server would then bind all interfaces on the scheme's default port: never what was meant.
        if (address.IsUnixPipe || address.IsNamedPipe)
        {
            return null; // not a port at all: the server says what it thinks of those when it binds
        }

        var host = address.Host;
        if (host.Contains(':') && !(host.StartsWith('[') && host.EndsWith(']')))
        {
            return $"port '{host[(host.LastIndexOf(':') + 1)..]}' is not a number";
        }

        return address.Port is < IPEndPoint.MinPort or > IPEndPoint.MaxPort
            ? $"port {address.Port} is out of range ({IPEndPoint.MinPort}-{IPEndPoint.MaxPort})"
            : null;
    }
}
