using System.Net;
using System.Text;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.LoadBalancing;

namespace Proxy.Forwarding.BackendPools;

/// <summary>
/// Builds a cluster's backend pool: a SocketsHttpHandler tuned for proxying plus an admission gate
/// per destination. NOTE: one handler serves the whole cluster; SocketsHttpHandler keeps a separate
/// connection pool per origin, so MaxConnectionsPerServer and HTTP/2 multiplexing are per destination.
/// </summary>
internal static class BackendPoolFactory
{
    public static readonly TimeSpan DefaultConnectTimeout = TimeSpan.FromSeconds(10);
    public static readonly TimeSpan DefaultIdleTimeout = TimeSpan.FromSeconds(60);
    public static readonly TimeSpan DefaultQueueTimeout = TimeSpan.FromSeconds(5);
    public const int DefaultMaxQueueLength = 1024;

    public static ClusterState Build(ClusterConfig config, IReadOnlyDictionary<string, ILoadBalancingPolicy> policies, TimeProvider? time = null,
        IForwarderTransport? nativeTransport = null, Microsoft.AspNetCore.DataProtection.IDataProtectionProvider? dataProtection = null)
    {
        var client = config.HttpClient ?? new HttpClientConfig();
        var destinations = (config.Destinations ?? new Dictionary<string, DestinationConfig>())
            .OrderBy(d => d.Key, StringComparer.OrdinalIgnoreCase)
            .Select(d => new DestinationState(d.Key, d.Value, CreateGate(client), time))
            .ToArray();

        var policyName = config.LoadBalancingPolicy ?? LoadBalancingPolicies.PowerOfTwoChoices;
        var request = config.HttpRequest;
        var requestConfig = new ForwarderRequestConfig
        {
            ActivityTimeout = request?.ActivityTimeout,
            Version = request?.Version is { } v ? BackendVersion.ParseVersion(v) : null,
            VersionPolicy = request?.VersionPolicy is { } p ? BackendVersion.ParsePolicy(p) : null,
            AllowResponseBuffering = request?.AllowResponseBuffering,
        };

        return new ClusterState(config, destinations, new HttpMessageInvoker(CreateHandler(client), disposeHandler: true),
            policies[policyName], requestConfig)
        {
            PanicWhenNoneAvailable = string.Equals(config.HealthCheck?.AvailableDestinationsPolicy,
                AvailableDestinationsPolicies.HealthyOrPanic, StringComparison.OrdinalIgnoreCase),
            NativeTransport = UsesNative(config, nativeTransport) ? nativeTransport!.CreateCluster(config) : null,
            Affinity = SessionAffinity.SessionAffinityState.Create(config, destinations, dataProtection),
        };
    }

    /// <summary>
    /// The cluster's <see cref="ClusterConfig.Transport"/>, or the registered native transport's default unless the cluster
    /// sets a key only HttpClient can honour (see <see cref="KeysOnlyHttpClientHonours"/>).
    /// </summary>
    private static bool UsesNative(ClusterConfig config, IForwarderTransport? native) =>
        native is not null && (config.Transport is null
            ? native.IsDefault && KeysOnlyHttpClientHonours(config).Count == 0
            : string.Equals(config.Transport, ForwarderTransports.Native, StringComparison.OrdinalIgnoreCase));

    /// <summary>
    /// True when the native transport is the default for clusters that name none, but this cluster sets keys only
    /// HttpClient honours, so it uses HttpClient (the caller logs it once per build of the cluster).
    /// </summary>
    internal static bool FallsBackToHttpClient(ClusterConfig config, IForwarderTransport? native) =>
        native is { IsDefault: true } && config.Transport is null && KeysOnlyHttpClientHonours(config).Count > 0;

    /// <summary>
    /// The cluster's keys the native relay cannot honour: it speaks straight to the destination (no outbound proxy) and
    /// its codecs send and read header values as Latin-1 only. NOTE: such a cluster runs on HttpClient rather than failing
    /// to load, so a YARP config keeps working on our server; an explicit <c>Transport: Native</c> with them is an error.
    /// </summary>
    internal static List<string> KeysOnlyHttpClientHonours(ClusterConfig config)
    {
        var keys = new List<string>(3);
        if (config.HttpClient?.WebProxy?.Address is not null)
        {
            keys.Add("HttpClient:WebProxy");
        }

        if (config.HttpClient?.RequestHeaderEncoding is not null)
        {
            keys.Add("HttpClient:RequestHeaderEncoding");
        }

        if (config.HttpClient?.ResponseHeaderEncoding is not null)
        {
            keys.Add("HttpClient:ResponseHeaderEncoding");
        }

        return keys;
    }

    private static AdmissionGate CreateGate(HttpClientConfig client) =>
        client.MaxConcurrentRequestsPerDestination is null
            ? AdmissionGate.Unbounded
            : new AdmissionGate(client.MaxConcurrentRequestsPerDestination, client.QueueTimeout ?? DefaultQueueTimeout,
                client.MaxQueueLength ?? DefaultMaxQueueLength);

    public static SocketsHttpHandler CreateHandler(HttpClientConfig client)
    {
        var handler = new SocketsHttpHandler
        {
            // A proxy passes these through untouched: the client decides about cookies, redirects
            // and compression, never us.
            UseCookies = false,
            UseProxy = false,
            AllowAutoRedirect = false,
            AutomaticDecompression = DecompressionMethods.None,
            // NOTE: one HTTP/2 connection caps at the server's MAX_CONCURRENT_STREAMS (~100); long
            // gRPC/SSE streams would queue behind it (YARP PR #748 measured -65% without this).
            EnableMultipleHttp2Connections = client.EnableMultipleHttp2Connections ?? true,
            ConnectTimeout = client.ConnectTimeout ?? DefaultConnectTimeout,
            PooledConnectionIdleTimeout = client.PooledConnectionIdleTimeout ?? DefaultIdleTimeout,
            PooledConnectionLifetime = client.PooledConnectionLifetime ?? Timeout.InfiniteTimeSpan,
            MaxConnectionsPerServer = client.MaxConnectionsPerServer ?? int.MaxValue,
            // Activity is propagated by the forwarder's header copy, not by the handler.
            ActivityHeadersPropagator = null,
        };

        if (client.KeepAlivePingDelay is { } delay)
        {
            handler.KeepAlivePingDelay = delay;
            handler.KeepAlivePingPolicy = HttpKeepAlivePingPolicy.Always;
        }

        if (client.KeepAlivePingTimeout is { } timeout)
        {
            handler.KeepAlivePingTimeout = timeout;
        }

        if (client.DangerousAcceptAnyServerCertificate == true)
        {
            handler.SslOptions.RemoteCertificateValidationCallback = (_, _, _, _) => true;
        }

        if (client.SslProtocols is { } protocols)
        {
            handler.SslOptions.EnabledSslProtocols = protocols;
        }

        // The names were checked with the configuration (Encoding.GetEncoding knows them).
        if (client.RequestHeaderEncoding is { } requestEncoding)
        {
            var encoding = Encoding.GetEncoding(requestEncoding);
            handler.RequestHeaderEncodingSelector = (_, _) => encoding;
        }

        if (client.ResponseHeaderEncoding is { } responseEncoding)
        {
            var encoding = Encoding.GetEncoding(responseEncoding);
            handler.ResponseHeaderEncodingSelector = (_, _) => encoding;
        }

        if (client.WebProxy is { Address: { } proxyAddress } proxy)
        {
            handler.UseProxy = true;
            handler.Proxy = new WebProxy(proxyAddress, proxy.BypassOnLocal ?? false) { UseDefaultCredentials = proxy.UseDefaultCredentials ?? false };
        }

        return handler;
    }
}
