namespace Proxy.Host;

/// <summary>The <c>DirectPath</c> configuration section: the proxy's fast path past the ASP.NET Core pipeline.</summary>
public sealed class DirectPathOptions
{
    public const string Section = "DirectPath";

    /// <summary>
    /// Requests of routes that need nothing from the ASP.NET Core pipeline are forwarded straight from the server's
    /// exchange to the native relay (no HttpContext, no endpoint routing, no hosting layer): 2-6 µs less user time per
    /// request (README, "Direct path"). Routes that name a policy, use transforms that need the HttpContext, or whose cluster uses session
    /// affinity stay on the pipeline; the log says which routes go direct. On by default on our server (the standalone
    /// proxy's pipeline holds nothing a route could miss: its access log and the server's request metric see direct
    /// requests too), off on Kestrel, where setting it is an error.
    /// </summary>
    public bool Enabled { get; set; }

    /// <summary>
    /// Reads the section; true when the direct path is on: when set to true, or when not set and the server is ours. A
    /// setting that cannot hold is a startup error naming its key: the direct path on Kestrel.
    /// </summary>
    internal static bool Read(IConfiguration configuration, ProxyHostServer server, string configFile)
    {
        var key = Section + ":" + nameof(Enabled);
        var text = configuration[key];
        if (string.IsNullOrEmpty(text))
        {
            return server == ProxyHostServer.Proxy;
        }

        if (!bool.TryParse(text, out var enabled))
        {
            throw new HostStartupException($"{key} must be true or false, not '{text}' (in {configFile} or the command line).");
        }

        if (!enabled)
        {
            return false;
        }

        if (server != ProxyHostServer.Proxy)
        {
            throw new HostStartupException($"{key} needs our server: Host:Server is {server}, where every request goes through the pipeline. Set Host:Server to Proxy or {key} to false.");
        }

        return true;
    }
}
