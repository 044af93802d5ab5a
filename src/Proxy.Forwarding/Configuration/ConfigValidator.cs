using Proxy.Forwarding.Forwarder;
using Microsoft.AspNetCore.Routing.Patterns;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// Checks a whole snapshot before it is used. Every message starts with the offending key in
/// configuration syntax (<c>ReverseProxy:Routes:r1:ClusterId: cluster 'x' does not exist</c>).
/// </summary>
internal static partial class ConfigValidator
{
    private static readonly HashSet<string> KnownPolicies = new(StringComparer.OrdinalIgnoreCase)
    {
        LoadBalancingPolicies.PowerOfTwoChoices, LoadBalancingPolicies.RoundRobin, LoadBalancingPolicies.Random,
        LoadBalancingPolicies.LeastRequests, LoadBalancingPolicies.FirstAlphabetical,
    };

    public static void Validate(ProxyConfig config, string root, List<string> errors, ICollection<string>? extraPolicies = null, bool nativeTransportAvailable = false)
    {
        var clusterIds = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var cluster in config.Clusters)
        {
            var path = $"{root}:Clusters:{cluster.ClusterId}";
            if (string.IsNullOrWhiteSpace(cluster.ClusterId))
            {
                errors.Add($"{root}:Clusters: a cluster has an empty ClusterId.");
            }
            else if (!clusterIds.Add(cluster.ClusterId))
            {
                errors.Add($"{path}: duplicate cluster id.");
            }

            ValidateCluster(cluster, path, errors, extraPolicies);
            if (cluster.Transport is { } transport)
            {
                if (!string.Equals(transport, ForwarderTransports.Native, StringComparison.OrdinalIgnoreCase)
                    && !string.Equals(transport, ForwarderTransports.HttpClient, StringComparison.OrdinalIgnoreCase))
                {
                    errors.Add($"{path}:Transport: '{transport}' is not one of {ForwarderTransports.Native}, {ForwarderTransports.HttpClient}.");
                }
                else if (string.Equals(transport, ForwarderTransports.Native, StringComparison.OrdinalIgnoreCase) && !nativeTransportAvailable)
                {
                    errors.Add($"{path}:Transport: '{ForwarderTransports.Native}' needs the native relay: run the proxy on Proxy.Server (UseProxyServer) with AddNativeRelay(), or use {ForwarderTransports.HttpClient}.");
                }
            }
        }

        var routeIds = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var route in config.Routes)
        {
            var path = $"{root}:Routes:{route.RouteId}";
            if (string.IsNullOrWhiteSpace(route.RouteId))
            {
                errors.Add($"{root}:Routes: a route has an empty RouteId.");
            }
            else if (!routeIds.Add(route.RouteId))
            {
                errors.Add($"{path}: duplicate route id.");
            }

            ValidateRoute(route, path, clusterIds, errors);
        }
    }

    private static void ValidateRoute(RouteConfig route, string path, HashSet<string> clusterIds, List<string> errors)
    {
        if (string.IsNullOrWhiteSpace(route.ClusterId))
        {
            errors.Add($"{path}:ClusterId: is required.");
        }
        else if (!clusterIds.Contains(route.ClusterId))
        {
            errors.Add($"{path}:ClusterId: cluster '{route.ClusterId}' does not exist.");
        }

        var match = route.Match;
        if (match.Path is not null && match.PathPrefix is not null)
        {
            errors.Add($"{path}:Match:PathPrefix: cannot be combined with Match:Path.");
        }
        else if (match.Path is null && match.PathPrefix is null && (match.Hosts is null || match.Hosts.Count == 0))
        {
            errors.Add($"{path}:Match: needs a Path, a PathPrefix or Hosts.");
        }

        if (match.Path is not null)
        {
            try
            {
                RoutePatternFactory.Parse(match.Path);
            }
            catch (RoutePatternException ex)
            {
                errors.Add($"{path}:Match:Path: '{match.Path}' is not a valid route template: {ex.Message}");
            }
        }

        if (match.PathPrefix is not null && !match.PathPrefix.StartsWith('/'))
        {
            errors.Add($"{path}:Match:PathPrefix: '{match.PathPrefix}' must start with '/'.");
        }

        for (var i = 0; i < (match.Hosts?.Count ?? 0); i++)
        {
            if (string.IsNullOrWhiteSpace(match.Hosts![i]))
            {
                errors.Add($"{path}:Match:Hosts:{i}: is empty.");
            }
        }

        for (var i = 0; i < (match.Methods?.Count ?? 0); i++)
        {
            var method = match.Methods![i];
            if (!HttpSyntax.IsToken(method))
            {
                errors.Add($"{path}:Match:Methods:{i}: '{method}' is not a valid HTTP method.");
            }
        }

        for (var i = 0; i < (match.Headers?.Count ?? 0); i++)
        {
            var h = match.Headers![i];
            var hasValues = h.Values is { Count: > 0 };
            var valueless = h.Mode is HeaderMatchMode.Exists or HeaderMatchMode.NotExists;
            CheckMatcher($"{path}:Match:Headers:{i}", h.Name, hasValues, valueless, h.Mode.ToString(), errors);
        }

        for (var i = 0; i < (match.QueryParameters?.Count ?? 0); i++)
        {
            var q = match.QueryParameters![i];
            var hasValues = q.Values is { Count: > 0 };
            CheckMatcher($"{path}:Match:QueryParameters:{i}", q.Name, hasValues, q.Mode == QueryParameterMatchMode.Exists, q.Mode.ToString(), errors);
        }

        CheckPositive(route.Timeout, $"{path}:Timeout", errors);
        if (route.Timeout is not null && route.TimeoutPolicy is not null)
        {
            errors.Add($"{path}:TimeoutPolicy: cannot be combined with Timeout; set one of them.");
        }

        if (route.MaxRequestBodySize < -1)
        {
            errors.Add($"{path}:MaxRequestBodySize: must be a number of bytes, or -1 for no limit.");
        }

        if (route.ActivityTimeout < TimeSpan.Zero)
        {
            errors.Add($"{path}:ActivityTimeout: must not be negative.");
        }

        for (var i = 0; i < (route.Transforms?.Count ?? 0); i++)
        {
            TransformFactory.Validate(route.Transforms![i], $"{path}:Transforms:{i}", errors);
        }
    }

    private static void CheckMatcher(string path, string name, bool hasValues, bool valueless, string mode, List<string> errors)
    {
        if (string.IsNullOrWhiteSpace(name))
        {
            errors.Add($"{path}:Name: is required.");
        }

        if (valueless && hasValues)
        {
            errors.Add($"{path}:Values: must be empty for mode {mode}.");
        }
        else if (!valueless && !hasValues)
        {
            errors.Add($"{path}:Values: at least one value is required for mode {mode}.");
        }
    }

    private static void ValidateCluster(ClusterConfig cluster, string path, List<string> errors, ICollection<string>? extraPolicies)
    {
        if (cluster.LoadBalancingPolicy is { } policy && !KnownPolicies.Contains(policy) && extraPolicies?.Contains(policy) != true)
        {
            errors.Add($"{path}:LoadBalancingPolicy: '{policy}' is not a known policy ({string.Join(", ", KnownPolicies)}).");
        }

        foreach (var (name, destination) in cluster.Destinations ?? new Dictionary<string, DestinationConfig>())
        {
            CheckAddress(destination.Address, $"{path}:Destinations:{name}:Address", required: true, errors);
            CheckAddress(destination.Health, $"{path}:Destinations:{name}:Health", required: false, errors);
            if (destination.Host is { } host && !IsAuthority(host))
            {
                errors.Add($"{path}:Destinations:{name}:Host: '{host}' is not a host name with an optional port (no scheme, path or userinfo).");
            }
        }

        if (cluster.HttpClient is { } client)
        {
            CheckPositive(client.MaxConnectionsPerServer, $"{path}:HttpClient:MaxConnectionsPerServer", errors);
            CheckPositive(client.MaxConcurrentRequestsPerDestination, $"{path}:HttpClient:MaxConcurrentRequestsPerDestination", errors);
            CheckPositive(client.ConnectTimeout, $"{path}:HttpClient:ConnectTimeout", errors);
            CheckPositive(client.QueueTimeout, $"{path}:HttpClient:QueueTimeout", errors);
            // SocketsHttpHandler's own floor is one second for both: the same values must hold on either transport.
            if (client.KeepAlivePingTimeout is { } pingTimeout && pingTimeout < TimeSpan.FromSeconds(1) && pingTimeout != Timeout.InfiniteTimeSpan)
            {
                errors.Add($"{path}:HttpClient:KeepAlivePingTimeout: must be at least 00:00:01 (or -00:00:00.001 for none).");
            }

            if (client.KeepAlivePingDelay is { } delay && delay < TimeSpan.FromSeconds(1) && delay != Timeout.InfiniteTimeSpan)
            {
                errors.Add($"{path}:HttpClient:KeepAlivePingDelay: must be at least 00:00:01 (or -00:00:00.001 to turn keep-alive pings off).");
            }
            if (client.MaxQueueLength < 0)
            {
                errors.Add($"{path}:HttpClient:MaxQueueLength: must not be negative.");
            }

            CheckEncoding(client.RequestHeaderEncoding, $"{path}:HttpClient:RequestHeaderEncoding", errors);
            CheckEncoding(client.ResponseHeaderEncoding, $"{path}:HttpClient:ResponseHeaderEncoding", errors);
        }

        // An explicit Native with keys only HttpClient honours would ignore them: refuse (without Transport the cluster
        // simply uses HttpClient, see BackendPoolFactory.KeysOnlyHttpClientHonours).
        if (string.Equals(cluster.Transport, ForwarderTransports.Native, StringComparison.OrdinalIgnoreCase))
        {
            foreach (var key in BackendPools.BackendPoolFactory.KeysOnlyHttpClientHonours(cluster))
            {
                errors.Add($"{path}:{key}: the native relay cannot honour it (it connects straight to the destination and sends header values as Latin-1); remove 'Transport: Native' to use HttpClient for this cluster, or remove the key.");
            }
        }

        ValidateHealth(cluster, path, errors);
        ValidateSessionAffinity(cluster.SessionAffinity, $"{path}:SessionAffinity", errors);

        if (cluster.HttpRequest is { } request)
        {
            if (request.Version is not null && BackendVersion.ParseVersion(request.Version) is null)
            {
                errors.Add($"{path}:HttpRequest:Version: '{request.Version}' is not one of 1.0, 1.1, 2, 3.");
            }

            if (request.VersionPolicy is not null && BackendVersion.ParsePolicy(request.VersionPolicy) is null)
            {
                errors.Add($"{path}:HttpRequest:VersionPolicy: '{request.VersionPolicy}' is not one of RequestVersionOrLower, RequestVersionOrHigher, RequestVersionExact.");
            }

            if (request.ActivityTimeout < TimeSpan.Zero)
            {
                errors.Add($"{path}:HttpRequest:ActivityTimeout: must not be negative.");
            }
        }
    }

    private static void CheckEncoding(string? name, string path, List<string> errors)
    {
        if (name is null)
        {
            return;
        }

        try
        {
            System.Text.Encoding.GetEncoding(name);
        }
        catch (ArgumentException)
        {
            errors.Add($"{path}: '{name}' is not a known encoding (e.g. utf-8, latin1, us-ascii).");
        }
    }

    // host[:port] as it may appear in Host or :authority (RFC 9110 §7.2): reg-name, IPv4 or [IPv6], no userinfo.
    private static bool IsAuthority(string text) =>
        text.Length > 0 && !text.AsSpan().ContainsAny("/?#@ \t")
        && Uri.TryCreate("http://" + text + "/", UriKind.Absolute, out var uri) && uri.AbsolutePath == "/"
        && uri.UserInfo.Length == 0 && uri.HostNameType != UriHostNameType.Unknown;

    private static void ValidateHealth(ClusterConfig cluster, string path, List<string> errors)
    {
        if (cluster.HealthCheck is { } health)
        {
            CheckName(health.AvailableDestinationsPolicy, $"{path}:HealthCheck:AvailableDestinationsPolicy", errors,
                AvailableDestinationsPolicies.HealthyAndUnknown, AvailableDestinationsPolicies.HealthyOrPanic);
            if (health.Active is { } active)
            {
                CheckName(active.Policy, $"{path}:HealthCheck:Active:Policy", errors, ActiveHealthCheckPolicies.ConsecutiveFailures);
                CheckPositive(active.Interval, $"{path}:HealthCheck:Active:Interval", errors);
                CheckPositive(active.Timeout, $"{path}:HealthCheck:Active:Timeout", errors);
                // YARP builds the probe's query with QueryString, which refuses a non-empty value without its '?'.
                if (active.Query is { Length: > 0 } query && (query[0] != '?' || query.Any(c => c is '#' || char.IsWhiteSpace(c) || char.IsControl(c))))
                {
                    errors.Add($"{path}:HealthCheck:Active:Query: '{query}' must start with '?' and hold no '#' or whitespace.");
                }
            }

            if (health.Passive is { } passive)
            {
                CheckName(passive.Policy, $"{path}:HealthCheck:Passive:Policy", errors,
                    PassiveHealthCheckPolicies.TransportFailureRate, PassiveHealthCheckPolicies.FirstFailure);
                CheckPositive(passive.ReactivationPeriod, $"{path}:HealthCheck:Passive:ReactivationPeriod", errors);
            }
        }

        // The policies' metadata knobs are read per request; a typo would silently fall back to the default.
        if (cluster.Metadata?.TryGetValue(TransportFailureRateHealthPolicyOptions.RateLimitMetadataKey, out var rate) == true
            && !PassiveHealthChecker.TryParseRate(rate, out _))
        {
            errors.Add($"{path}:Metadata:{TransportFailureRateHealthPolicyOptions.RateLimitMetadataKey}: '{rate}' is not a number from 0 to 1.");
        }

        if (cluster.Metadata?.TryGetValue(ActiveHealthChecker.ThresholdMetadataKey, out var threshold) == true
            && !(int.TryParse(threshold, System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out var t) && t > 0))
        {
            errors.Add($"{path}:Metadata:{ActiveHealthChecker.ThresholdMetadataKey}: '{threshold}' is not a positive integer.");
        }
    }

    private static void CheckName(string? value, string path, List<string> errors, params string[] known)
    {
        if (value is not null && !known.Contains(value, StringComparer.OrdinalIgnoreCase))
        {
            errors.Add($"{path}: '{value}' is not a known policy ({string.Join(", ", known)}).");
        }
    }

    private static void CheckAddress(string? address, string path, bool required, List<string> errors)
    {
        if (string.IsNullOrWhiteSpace(address))
        {
            if (required)
            {
                errors.Add($"{path}: is required.");
            }

            return;
        }

        if (!Uri.TryCreate(address, UriKind.Absolute, out var uri) || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps))
        {
            // Uri refuses a port past 65535 with no reason given: name it rather than blame the whole address.
            errors.Add(OutOfRangePort(address) is { } port
                ? $"{path}: '{address}' has port {port}, out of range (1-65535)."
                : $"{path}: '{address}' is not an absolute http:// or https:// address.");
        }
        else if (!string.IsNullOrEmpty(uri.Query) || !string.IsNullOrEmpty(uri.Fragment))
        {
            errors.Add($"{path}: '{address}' must not have a query or fragment.");
        }
    }

    /// <summary>The port of an <c>http(s)://host:port/...</c> address when it is a number past 65535, else null.</summary>
    private static string? OutOfRangePort(string address)
    {
        var match = System.Text.RegularExpressions.Regex.Match(address.Trim(), @"^https?://(?:\[[^\]]*\]|[^/:?#@]*)(?::(?<port>[0-9]+))(?:[/?#]|$)",
            System.Text.RegularExpressions.RegexOptions.IgnoreCase | System.Text.RegularExpressions.RegexOptions.CultureInvariant);
        var port = match.Groups["port"].Value;
        return match.Success && (port.Length > 5 || int.Parse(port, System.Globalization.CultureInfo.InvariantCulture) > 65535) ? port : null;
    }

    private static void CheckPositive(int? value, string path, List<string> errors)
    {
        if (value <= 0)
        {
            errors.Add($"{path}: must be positive.");
        }
    }

    private static void CheckPositive(TimeSpan? value, string path, List<string> errors)
    {
        if (value <= TimeSpan.Zero)
        {
            errors.Add($"{path}: must be positive.");
        }
    }
}

/// <summary>Thrown when a configuration snapshot is invalid; the message lists every problem with its key.</summary>
public sealed class ProxyConfigException : Exception
{
    /// <summary>Creates the exception from the list of problems.</summary>
    public ProxyConfigException(IReadOnlyList<string> errors)
        : base("Invalid reverse proxy configuration:" + Environment.NewLine + string.Join(Environment.NewLine, errors))
    {
        Errors = errors;
    }

    /// <summary>Every problem found, each prefixed with its configuration key.</summary>
    public IReadOnlyList<string> Errors { get; }
}

/// <summary>Parses the HttpRequest version settings.</summary>
internal static class BackendVersion
{
    public static Version? ParseVersion(string text) => text.Trim() switch
    {
        "1.0" => System.Net.HttpVersion.Version10,
        "1.1" => System.Net.HttpVersion.Version11,
        "2" or "2.0" => System.Net.HttpVersion.Version20,
        "3" or "3.0" => System.Net.HttpVersion.Version30,
        _ => null,
    };

    public static HttpVersionPolicy? ParsePolicy(string text) =>
        Enum.TryParse<HttpVersionPolicy>(text, ignoreCase: true, out var p) && Enum.IsDefined(p) ? p : null;
}
