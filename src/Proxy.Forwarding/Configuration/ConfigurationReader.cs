using System.Globalization;
using Microsoft.Extensions.Configuration;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// Reads YARP's JSON schema from <see cref="IConfiguration"/> by hand rather than with the binder,
/// so that every malformed value is reported with its full key (<c>ReverseProxy:Routes:r1:Timeout</c>)
/// instead of an exception from deep inside the binder.
/// </summary>
internal static partial class ConfigurationReader
{
    /// <param name="warnings">Receives the keys that are ignored (as YARP ignores them); null = not reported.</param>
    public static ProxyConfig Read(IConfiguration section, List<string> errors, List<string>? warnings = null)
    {
        ConfigKeyChecker.Check(section, errors, warnings);
        var routes = new List<RouteConfig>();
        foreach (var child in section.GetSection("Routes").GetChildren())
        {
            routes.Add(ReadRoute(child, errors));
        }

        var clusters = new List<ClusterConfig>();
        foreach (var child in section.GetSection("Clusters").GetChildren())
        {
            clusters.Add(ReadCluster(child, errors));
        }

        return new ProxyConfig(routes, clusters);
    }

    private static RouteConfig ReadRoute(IConfigurationSection s, List<string> errors)
    {
        var match = s.GetSection("Match");
        return new RouteConfig
        {
            RouteId = s.Key,
            ClusterId = s["ClusterId"],
            Order = Int(s, "Order", errors),
            Timeout = Time(s, "Timeout", errors),
            ActivityTimeout = Time(s, "ActivityTimeout", errors),
            AuthorizationPolicy = s["AuthorizationPolicy"],
            CorsPolicy = s["CorsPolicy"],
            RateLimiterPolicy = s["RateLimiterPolicy"],
            OutputCachePolicy = s["OutputCachePolicy"],
            TimeoutPolicy = s["TimeoutPolicy"],
            MaxRequestBodySize = Long(s, "MaxRequestBodySize", errors),
            Metadata = Dictionary(s.GetSection("Metadata")),
            Transforms = s.GetSection("Transforms").GetChildren()
                .Select(t => (IReadOnlyDictionary<string, string>)Dictionary(t)!)
                .Where(d => d is not null)
                .ToList() is { Count: > 0 } list ? list : null,
            Match = new RouteMatch
            {
                Path = match["Path"],
                PathPrefix = match["PathPrefix"],
                Hosts = List(match.GetSection("Hosts")),
                Methods = List(match.GetSection("Methods")),
                Headers = match.GetSection("Headers").GetChildren().Select(h => new RouteHeaderMatch
                {
                    Name = h["Name"] ?? "",
                    Values = List(h.GetSection("Values")),
                    Mode = Enum(h, "Mode", HeaderMatchMode.ExactHeader, errors),
                    IsCaseSensitive = Bool(h, "IsCaseSensitive", errors) ?? false,
                }).ToList() is { Count: > 0 } headers ? headers : null,
                QueryParameters = match.GetSection("QueryParameters").GetChildren().Select(q => new RouteQueryParameterMatch
                {
                    Name = q["Name"] ?? "",
                    Values = List(q.GetSection("Values")),
                    Mode = Enum(q, "Mode", QueryParameterMatchMode.Exact, errors),
                    IsCaseSensitive = Bool(q, "IsCaseSensitive", errors) ?? false,
                }).ToList() is { Count: > 0 } queries ? queries : null,
            },
        };
    }

    private static ClusterConfig ReadCluster(IConfigurationSection s, List<string> errors)
    {
        var destinations = new Dictionary<string, DestinationConfig>(StringComparer.OrdinalIgnoreCase);
        foreach (var d in s.GetSection("Destinations").GetChildren())
        {
            destinations[d.Key] = new DestinationConfig
            {
                Address = d["Address"] ?? "",
                Health = d["Health"],
                Host = d["Host"],
                Metadata = Dictionary(d.GetSection("Metadata")),
            };
        }

        var client = s.GetSection("HttpClient");
        var request = s.GetSection("HttpRequest");
        var health = s.GetSection("HealthCheck");
        return new ClusterConfig
        {
            ClusterId = s.Key,
            LoadBalancingPolicy = s["LoadBalancingPolicy"],
            Transport = s["Transport"],
            Destinations = destinations,
            Metadata = Dictionary(s.GetSection("Metadata")),
            HttpClient = !client.Exists() ? null : new HttpClientConfig
            {
                MaxConnectionsPerServer = Int(client, "MaxConnectionsPerServer", errors),
                EnableMultipleHttp2Connections = Bool(client, "EnableMultipleHttp2Connections", errors),
                PooledConnectionLifetime = Time(client, "PooledConnectionLifetime", errors),
                PooledConnectionIdleTimeout = Time(client, "PooledConnectionIdleTimeout", errors),
                ConnectTimeout = Time(client, "ConnectTimeout", errors),
                DangerousAcceptAnyServerCertificate = Bool(client, "DangerousAcceptAnyServerCertificate", errors),
                KeepAlivePingDelay = Time(client, "KeepAlivePingDelay", errors),
                KeepAlivePingTimeout = Time(client, "KeepAlivePingTimeout", errors),
                MaxConcurrentRequestsPerDestination = Int(client, "MaxConcurrentRequestsPerDestination", errors),
                QueueTimeout = Time(client, "QueueTimeout", errors),
                MaxQueueLength = Int(client, "MaxQueueLength", errors),
                SslProtocols = SslProtocols(client.GetSection("SslProtocols"), errors),
                RequestHeaderEncoding = client["RequestHeaderEncoding"],
                ResponseHeaderEncoding = client["ResponseHeaderEncoding"],
                WebProxy = !client.GetSection("WebProxy").Exists() ? null : new WebProxyConfig
                {
                    Address = AbsoluteUri(client.GetSection("WebProxy"), "Address", errors),
                    BypassOnLocal = Bool(client.GetSection("WebProxy"), "BypassOnLocal", errors),
                    UseDefaultCredentials = Bool(client.GetSection("WebProxy"), "UseDefaultCredentials", errors),
                },
            },
            HttpRequest = !request.Exists() ? null : new HttpRequestConfig
            {
                ActivityTimeout = Time(request, "ActivityTimeout", errors),
                Version = request["Version"],
                VersionPolicy = request["VersionPolicy"],
                AllowResponseBuffering = Bool(request, "AllowResponseBuffering", errors),
            },
            SessionAffinity = ReadSessionAffinity(s.GetSection("SessionAffinity"), errors),
            HealthCheck = !health.Exists() ? null : new HealthCheckConfig
            {
                AvailableDestinationsPolicy = health["AvailableDestinationsPolicy"],
                Active = !health.GetSection("Active").Exists() ? null : new ActiveHealthCheckConfig
                {
                    Enabled = Bool(health.GetSection("Active"), "Enabled", errors),
                    Interval = Time(health.GetSection("Active"), "Interval", errors),
                    Timeout = Time(health.GetSection("Active"), "Timeout", errors),
                    Policy = health["Active:Policy"],
                    Path = health["Active:Path"],
                    Query = health["Active:Query"],
                },
                Passive = !health.GetSection("Passive").Exists() ? null : new PassiveHealthCheckConfig
                {
                    Enabled = Bool(health.GetSection("Passive"), "Enabled", errors),
                    Policy = health["Passive:Policy"],
                    ReactivationPeriod = Time(health.GetSection("Passive"), "ReactivationPeriod", errors),
                },
            },
        };
    }

    private static IReadOnlyList<string>? List(IConfigurationSection s)
    {
        var values = s.GetChildren().Select(c => c.Value).OfType<string>().ToList();
        return values.Count == 0 ? null : values;
    }

    private static IReadOnlyDictionary<string, string>? Dictionary(IConfigurationSection s)
    {
        var values = s.GetChildren().Where(c => c.Value is not null)
            .ToDictionary(c => c.Key, c => c.Value!, StringComparer.OrdinalIgnoreCase);
        return values.Count == 0 ? null : values;
    }

    /// <summary>
    /// YARP's form is a list (<c>"SslProtocols": [ "Tls12", "Tls13" ]</c>); one string with commas is accepted too.
    /// </summary>
    private static System.Security.Authentication.SslProtocols? SslProtocols(IConfigurationSection s, List<string> errors)
    {
        var entries = s.Value is { } single
            ? [(s.Path, single)]
            : s.GetChildren().Where(c => c.Value is not null).Select(c => (c.Path, c.Value!)).ToList();
        if (entries.Count == 0)
        {
            return null;
        }

        var result = System.Security.Authentication.SslProtocols.None;
        foreach (var (path, text) in entries)
        {
            foreach (var name in text.Split(',', StringSplitOptions.TrimEntries | StringSplitOptions.RemoveEmptyEntries))
            {
                // Numbers would slip through Enum.TryParse; only names are configuration.
                if (!char.IsAsciiLetter(name[0]) || !System.Enum.TryParse<System.Security.Authentication.SslProtocols>(name, ignoreCase: true, out var protocol))
                {
                    errors.Add($"{path}: '{name}' is not one of Tls12, Tls13 (or None for the platform default; Tls, Tls11, Ssl2, Ssl3 are obsolete).");
                    continue;
                }

                result |= protocol;
            }
        }

        return result;
    }

    private static Uri? AbsoluteUri(IConfigurationSection s, string key, List<string> errors)
    {
        var text = s[key];
        if (text is null)
        {
            errors.Add($"{s.Path}:{key}: required.");
            return null;
        }

        if (Uri.TryCreate(text, UriKind.Absolute, out var uri) && uri.Scheme is "http" or "https" or "socks4" or "socks4a" or "socks5")
        {
            return uri;
        }

        errors.Add($"{s.Path}:{key}: '{text}' is not an absolute http://, https:// or socks5:// address.");
        return null;
    }

    private static TimeSpan? Time(IConfigurationSection s, string key, List<string> errors)
    {
        var text = s[key];
        if (text is null)
        {
            return null;
        }

        if (TimeSpan.TryParse(text, CultureInfo.InvariantCulture, out var value))
        {
            return value;
        }

        errors.Add($"{s.Path}:{key}: '{text}' is not a valid TimeSpan (expected hh:mm:ss[.fff]).");
        return null;
    }

    private static int? Int(IConfigurationSection s, string key, List<string> errors) => Integer<int>(s, key, errors);

    private static long? Long(IConfigurationSection s, string key, List<string> errors) => Integer<long>(s, key, errors);

    private static T? Integer<T>(IConfigurationSection s, string key, List<string> errors)
        where T : struct, System.Numerics.IBinaryInteger<T>
    {
        var text = s[key];
        if (text is null)
        {
            return null;
        }

        if (T.TryParse(text, NumberStyles.Integer, CultureInfo.InvariantCulture, out var value))
        {
            return value;
        }

        errors.Add($"{s.Path}:{key}: '{text}' is not a valid integer.");
        return null;
    }

    private static bool? Bool(IConfigurationSection s, string key, List<string> errors)
    {
        var text = s[key];
        if (text is null)
        {
            return null;
        }

        if (bool.TryParse(text, out var value))
        {
            return value;
        }

        errors.Add($"{s.Path}:{key}: '{text}' is not 'true' or 'false'.");
        return null;
    }

    private static T Enum<T>(IConfigurationSection s, string key, T fallback, List<string> errors)
        where T : struct, Enum
    {
        var text = s[key];
        if (text is null)
        {
            return fallback;
        }

        if (System.Enum.TryParse<T>(text, ignoreCase: true, out var value) && System.Enum.IsDefined(value))
        {
            return value;
        }

        errors.Add($"{s.Path}:{key}: '{text}' is not one of {string.Join(", ", System.Enum.GetNames<T>())}.");
        return fallback;
    }
}
