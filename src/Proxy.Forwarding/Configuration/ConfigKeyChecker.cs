using Microsoft.Extensions.Configuration;

namespace Proxy.Forwarding.Configuration;

/// <summary>
/// No key under <c>ReverseProxy</c> is ignored in silence. Every key is compared with the schema below: a key we read passes;
/// a YARP key we do not implement is an error that says so; a key YARP itself ignores is a warning; anything else (a typo,
/// a key from another product) is an error naming its full path and what the section accepts. Without this a misspelt
/// <c>AuthorizationPolicy</c> would serve the route unprotected.
/// </summary>
/// <remarks>
/// NOTE: when the reader learns a key, add it here too (the schema tests read a full config to catch a key missing here).
/// </remarks>
// Stateless; the schema is built once and never changed.
internal static class ConfigKeyChecker
{
    /// <summary>Where a key stands.</summary>
    private enum Kind
    {
        /// <summary>A single value.</summary>
        Value,
        /// <summary>A single value or a list of values (<c>SslProtocols</c>: YARP's list, or one string with commas).</summary>
        ValueOrList,
        /// <summary>A section with the named keys.</summary>
        Section,
        /// <summary>Any keys (names or indexes), each child of the same shape.</summary>
        Map,
        /// <summary>Free-form string values (Metadata, a transform's parameters): any key, values only.</summary>
        Strings,
        /// <summary>A YARP key we do not implement: an error saying so.</summary>
        NotSupported,
        /// <summary>A key YARP ignores, and so do we: a warning.</summary>
        Ignored,
    }

    private sealed record Node(Kind Kind, string What, IReadOnlyDictionary<string, Node>? Keys = null, Node? Each = null, string? Why = null);

    private static Node Value { get; } = new(Kind.Value, "value");

    private static Node Strings(string what) => new(Kind.Strings, what);

    private static Node NotSupported(string why) => new(Kind.NotSupported, "", Why: why);

    private static Node Section(string what, params (string Key, Node Node)[] keys) =>
        new(Kind.Section, what, keys.ToDictionary(k => k.Key, k => k.Node, StringComparer.OrdinalIgnoreCase));

    private static Node Map(Node each) => new(Kind.Map, each.What, Each: each);

    private static readonly Node Matcher = Section("header or query matcher",
        ("Name", Value), ("Values", Map(Value)), ("Mode", Value), ("IsCaseSensitive", Value));

    private static readonly Node Route = Section("route",
        ("ClusterId", Value), ("Order", Value), ("Timeout", Value), ("ActivityTimeout", Value),
        ("AuthorizationPolicy", Value), ("CorsPolicy", Value), ("RateLimiterPolicy", Value), ("OutputCachePolicy", Value),
        ("TimeoutPolicy", Value), ("MaxRequestBodySize", Value), ("Metadata", Strings("route metadata")),
        // A transform's own names are checked by the transform factory (an unknown transform is an error there).
        ("Transforms", Map(Strings("transform"))),
        ("Match", Section("route match", ("Path", Value), ("PathPrefix", Value), ("Hosts", Map(Value)), ("Methods", Map(Value)),
            ("Headers", Map(Matcher)), ("QueryParameters", Map(Matcher)))),
        ("RouteId", NotSupported("the route's id is its key under Routes; YARP refuses this older array format too")),
        ("Extensions", NotSupported("YARP's typed config extensions are not supported")));

    private static readonly Node Cluster = Section("cluster",
        ("LoadBalancingPolicy", Value), ("Transport", Value), ("Metadata", Strings("cluster metadata")),
        ("ClusterId", new Node(Kind.Ignored, "", Why: "the cluster's id is its key under Clusters (YARP ignores it too)")),
        ("Destinations", Map(Section("destination", ("Address", Value), ("Health", Value), ("Metadata", Strings("destination metadata")),
            ("Host", Value)))),
        ("HttpClient", Section("HttpClient",
            ("MaxConnectionsPerServer", Value), ("EnableMultipleHttp2Connections", Value), ("PooledConnectionLifetime", Value),
            ("PooledConnectionIdleTimeout", Value), ("ConnectTimeout", Value), ("DangerousAcceptAnyServerCertificate", Value),
            ("KeepAlivePingDelay", Value), ("KeepAlivePingTimeout", Value), ("MaxConcurrentRequestsPerDestination", Value),
            ("QueueTimeout", Value), ("MaxQueueLength", Value), ("SslProtocols", new Node(Kind.ValueOrList, "TLS versions")),
            ("RequestHeaderEncoding", Value), ("ResponseHeaderEncoding", Value),
            ("WebProxy", Section("WebProxy", ("Address", Value), ("BypassOnLocal", Value), ("UseDefaultCredentials", Value))))),
        ("HttpRequest", Section("HttpRequest", ("ActivityTimeout", Value), ("Version", Value), ("VersionPolicy", Value),
            ("AllowResponseBuffering", Value))),
        ("HealthCheck", Section("HealthCheck", ("AvailableDestinationsPolicy", Value),
            ("Active", Section("active health check", ("Enabled", Value), ("Interval", Value), ("Timeout", Value), ("Policy", Value), ("Path", Value),
                ("Query", Value))),
            ("Passive", Section("passive health check", ("Enabled", Value), ("Policy", Value), ("ReactivationPeriod", Value))))),
        ("SessionAffinity", Section("SessionAffinity", ("Enabled", Value), ("Policy", Value), ("FailurePolicy", Value), ("AffinityKeyName", Value),
            ("Cookie", Section("affinity cookie", ("Domain", Value), ("Expiration", Value), ("HttpOnly", Value), ("IsEssential", Value),
                ("MaxAge", Value), ("Path", Value), ("SameSite", Value), ("SecurePolicy", Value))))),
        ("Extensions", NotSupported("YARP's typed config extensions are not supported")));

    private static readonly Node Root = Section("ReverseProxy", ("Routes", Map(Route)), ("Clusters", Map(Cluster)));

    /// <summary>Checks every key under <paramref name="section"/> (the <c>ReverseProxy</c> section).</summary>
    public static void Check(IConfiguration section, List<string> errors, List<string>? warnings)
    {
        var path = section is IConfigurationSection s ? s.Path : "ReverseProxy";
        CheckChildren(section, path, Root, errors, warnings);
    }

    private static void CheckChildren(IConfiguration section, string path, Node node, List<string> errors, List<string>? warnings)
    {
        foreach (var child in section.GetChildren())
        {
            var childPath = $"{path}:{child.Key}";
            var expected = node.Kind switch
            {
                Kind.Map => node.Each!,
                Kind.Strings => Value,
                _ => node.Keys!.GetValueOrDefault(child.Key),
            };
            if (expected is null)
            {
                errors.Add($"{childPath}: is not a known {node.What} key (known: {string.Join(", ", Known(node))}).");
            }
            else
            {
                CheckOne(child, childPath, expected, node, errors, warnings);
            }
        }
    }

    private static void CheckOne(IConfigurationSection child, string path, Node expected, Node parent, List<string> errors, List<string>? warnings)
    {
        var isSection = child.GetChildren().Any();
        switch (expected.Kind)
        {
            case Kind.NotSupported:
                errors.Add($"{path}: is not supported: {expected.Why}.");
                break;
            case Kind.Ignored:
                warnings?.Add($"{path}: is ignored: {expected.Why}.");
                break;
            case Kind.ValueOrList when isSection:
                CheckChildren(child, path, Map(Value), errors, warnings);
                break;
            case Kind.Value when isSection:
                // A section where a value belongs would read as "not set" and be dropped.
                errors.Add(parent.Kind == Kind.Strings
                    ? $"{path}: {parent.What} values are strings, not sections."
                    : $"{path}: must be a single value, not a section.");
                break;
            case Kind.Section or Kind.Map or Kind.Strings when !isSection && !string.IsNullOrEmpty(child.Value):
                errors.Add($"{path}: must be a section ({expected.What}), not the value '{child.Value}'.");
                break;
            case Kind.Section or Kind.Map or Kind.Strings:
                CheckChildren(child, path, expected, errors, warnings);
                break;
        }
    }

    /// <summary>The keys a section accepts, for the message (not the ones only there to be refused).</summary>
    private static IEnumerable<string> Known(Node node) =>
        node.Keys!.Where(k => k.Value.Kind is not (Kind.NotSupported or Kind.Ignored)).Select(k => k.Key);
}
