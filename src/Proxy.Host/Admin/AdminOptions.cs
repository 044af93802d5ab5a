using System.Net;

namespace Proxy.Host.Admin;

/// <summary>The <c>Admin</c> configuration section: the operator's endpoint (health, metrics, config, dashboard).</summary>
public sealed class AdminOptions
{
    /// <summary>The configuration section.</summary>
    public const string Section = "Admin";

    /// <summary>Envoy's documented admin port; loopback, so nothing outside the machine sees it unless asked.</summary>
    public const string DefaultUrl = "http://127.0.0.1:9901";

    /// <summary>Serve the admin endpoint. True by default in the standalone proxy.</summary>
    public bool Enabled { get; set; } = true;

    /// <summary>Where the admin endpoint listens (one http or https URL). Default <see cref="DefaultUrl"/>.</summary>
    public string Url { get; set; } = DefaultUrl;

    /// <summary>
    /// A bearer token every admin request must carry (<c>Authorization: Bearer TOKEN</c>, or <c>?access_token=TOKEN</c>
    /// for a browser). Required when <see cref="Url"/> is not a loopback address.
    /// </summary>
    public string? Token { get; set; }

    /// <summary>Reads and checks the section; null when the admin endpoint is off.</summary>
    public static AdminOptions? Read(IConfiguration configuration)
    {
        var options = configuration.GetSection(Section).Get<AdminOptions>() ?? new AdminOptions();
        if (!options.Enabled)
        {
            return null;
        }

        var problem = Proxy.Server.ListenUrl.FindProblem(options.Url);
        if (problem is not null)
        {
            throw new HostStartupException($"{Section}:Url '{options.Url}': {problem}.");
        }

        if (string.IsNullOrEmpty(options.Token) && !IsLoopback(options.Url))
        {
            throw new HostStartupException(
                $"{Section}:Url '{options.Url}' is not a loopback address, so the admin endpoint needs a token: set {Section}:Token "
                + $"(clients send 'Authorization: Bearer TOKEN'), bind {Section}:Url to 127.0.0.1, or set {Section}:Enabled=false.");
        }

        return options;
    }

    /// <summary>True for localhost, 127.0.0.0/8 and ::1; false for wildcards (*, +, 0.0.0.0, ::) and everything else.</summary>
    public static bool IsLoopback(string url)
    {
        // Uri rejects the wildcard hosts Kestrel accepts (http://*:9901, http://+:9901): those are anything but loopback.
        if (!Uri.TryCreate(url, UriKind.Absolute, out var uri))
        {
            return false;
        }

        return uri.IsLoopback || (IPAddress.TryParse(uri.Host.Trim('[', ']'), out var address) && IPAddress.IsLoopback(address));
    }
}
