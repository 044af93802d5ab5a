using System.Text.Json;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Primitives;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.LoadBalancing;
using Proxy.Forwarding.Routing;
using Proxy.Forwarding.Telemetry;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Configuration;

/// <summary>One immutable, validated configuration with its runtime state.</summary>
internal sealed record ProxySnapshot(
    IReadOnlyDictionary<string, RouteState> Routes,
    IReadOnlyDictionary<string, ClusterState> Clusters,
    IReadOnlyDictionary<string, string> RouteFingerprints,
    IReadOnlyDictionary<string, string> ClusterFingerprints)
{
    /// <summary>How many routes and clusters this snapshot built anew (the rest it kept from the one before).</summary>
    public int RebuiltRoutes { get; init; }

    public int RebuiltClusters { get; init; }
}

/// <summary>
/// Loads, validates and swaps configuration snapshots. The first load throws on error (startup
/// fails with the offending keys); a bad reload is logged and the last good snapshot stays.
/// Only routes and clusters whose config changed are rebuilt, so unchanged clusters keep their
/// connection pools and in-flight counters.
/// </summary>
// Readers take Current (one volatile reference); only the reload callback writes it, under _reloadLock.
internal sealed class ProxyStateManager : IProxyStateLookup, IDisposable
{
    private readonly IProxyConfigProvider? _provider;
    private readonly IReadOnlyDictionary<string, ILoadBalancingPolicy> _policies;
    private readonly ILogger<ProxyStateManager> _logger;
    private readonly TimeProvider _time;
    private readonly Lock _reloadLock = new();
    private volatile ProxySnapshot? _current;
    private CancellationTokenSource _changed = new();
    private IDisposable? _subscription;
    private TaskCompletionSource _reloadAttempt = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly IForwarderTransport? _nativeTransport;
    private readonly RoutePolicyValidator? _routePolicies;
    private readonly Microsoft.AspNetCore.DataProtection.IDataProtectionProvider? _dataProtection;

    public ProxyStateManager(IEnumerable<ILoadBalancingPolicy> policies, ILogger<ProxyStateManager> logger, IProxyConfigProvider? provider = null, TimeProvider? time = null,
        IEnumerable<IForwarderTransport>? transports = null, RoutePolicyValidator? routePolicies = null,
        Microsoft.AspNetCore.DataProtection.IDataProtectionProvider? dataProtection = null)
    {
        _dataProtection = dataProtection;
        _routePolicies = routePolicies;
        _nativeTransport = transports?.LastOrDefault();
        _time = time ?? TimeProvider.System;
        _provider = provider;
        _policies = policies.GroupBy(p => p.Name, StringComparer.OrdinalIgnoreCase)
            .ToDictionary(g => g.Key, g => g.Last(), StringComparer.OrdinalIgnoreCase);
        _logger = logger;
    }

    public bool IsInitialized => _current is not null;

    bool IProxyStateLookup.IsLoaded => IsInitialized;

    IReadOnlyList<RouteConfig> IProxyStateLookup.Routes => _current is { } current ? current.Routes.Values.Select(r => r.Config).ToList() : [];

    IReadOnlyList<ClusterState> IProxyStateLookup.Clusters => _current is { } current ? current.Clusters.Values.ToList() : [];

    public ProxySnapshot Current => _current ?? throw new InvalidOperationException("The proxy configuration was not loaded; call MapProxyForwarding().");

    /// <summary>Fires when a new snapshot was applied.</summary>
    public IChangeToken ChangeToken => new CancellationChangeToken(_changed.Token);

    /// <summary>Loads the first snapshot; throws <see cref="ProxyConfigException"/> when it is invalid.</summary>
    public void Initialize()
    {
        lock (_reloadLock)
        {
            if (_current is not null)
            {
                return;
            }

            if (_provider is null)
            {
                throw new InvalidOperationException("No proxy configuration source: call LoadFromConfig(...) or LoadFromMemory(...) after AddProxyForwarding().");
            }

            _current = BuildSnapshot(LoadValidated(), previous: null);
            LogApplied(_current);
            _subscription = Microsoft.Extensions.Primitives.ChangeToken.OnChange(_provider.GetChangeToken, Reload);
        }
    }

    /// <summary>Why the last reload was rejected; null after a successful one.</summary>
    public string? LastReloadError { get; private set; }

    /// <summary>Completes when the next reload attempt (good or bad) has been processed.</summary>
    internal Task NextReloadAttempt => _reloadAttempt.Task;

    private void Reload()
    {
        lock (_reloadLock)
        {
            try
            {
                _current = BuildSnapshot(LoadValidated(), _current);
                LastReloadError = null;
            }
            catch (Exception ex)
            {
                var errors = ex is ProxyConfigException pce ? string.Join(Environment.NewLine, pce.Errors) : ex.Message;
                LastReloadError = errors;
                Log.ReloadRejected(_logger, errors, ex is ProxyConfigException ? null : ex);
                CompleteAttempt();
                return;
            }

            var previous = _changed;
            _changed = new CancellationTokenSource();
            try
            {
                previous.Cancel();
            }
            finally
            {
                // The snapshot is live even when a listener threw.
                LogApplied(_current);
                CompleteAttempt();
            }
        }
    }

    private void CompleteAttempt() =>
        Interlocked.Exchange(ref _reloadAttempt, new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously)).TrySetResult();

    private ProxyConfig LoadValidated()
    {
        var errors = new List<string>();
        var config = _provider!.GetConfig(errors);
        ConfigValidator.Validate(config, _provider.Name, errors, _policies.Keys.ToList(), _nativeTransport is not null);
        _routePolicies?.Validate(config, _provider.Name, errors);
        if (errors.Count > 0)
        {
            throw new ProxyConfigException(_provider is ConfigurationConfigProvider c ? errors.ConvertAll(c.DescribeSource) : errors);
        }

        return config;
    }

    private ProxySnapshot BuildSnapshot(ProxyConfig config, ProxySnapshot? previous)
    {
        var clusters = new Dictionary<string, ClusterState>(StringComparer.OrdinalIgnoreCase);
        var clusterPrints = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        var rebuiltClusters = 0;
        foreach (var cluster in config.Clusters)
        {
            var print = Fingerprint(cluster);
            clusterPrints[cluster.ClusterId] = print;
            if (previous is not null && previous.ClusterFingerprints.GetValueOrDefault(cluster.ClusterId) == print)
            {
                clusters[cluster.ClusterId] = previous.Clusters[cluster.ClusterId];
                continue;
            }

            // NOTE: a replaced cluster's handler is not disposed: requests in flight still use it.
            // Its idle connections close after PooledConnectionIdleTimeout.
            clusters[cluster.ClusterId] = BackendPoolFactory.Build(cluster, _policies, _time, _nativeTransport, _dataProtection);
            if (BackendPoolFactory.FallsBackToHttpClient(cluster, _nativeTransport))
            {
                Log.ClusterUsesHttpClient(_logger, cluster.ClusterId, string.Join(", ", BackendPoolFactory.KeysOnlyHttpClientHonours(cluster)));
            }

            rebuiltClusters++;
        }

        var routes = new Dictionary<string, RouteState>(StringComparer.OrdinalIgnoreCase);
        var routePrints = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        var rebuiltRoutes = 0;
        foreach (var route in config.Routes)
        {
            var print = Fingerprint(route);
            routePrints[route.RouteId] = print;
            if (previous is not null && previous.RouteFingerprints.GetValueOrDefault(route.RouteId) == print)
            {
                routes[route.RouteId] = previous.Routes[route.RouteId];
                continue;
            }

            routes[route.RouteId] = new RouteState(route, TransformFactory.Build(route.Transforms));
            rebuiltRoutes++;
        }

        // A replaced or removed cluster's native transport retires: requests in flight finish on it, its connections close
        // once idle (unlike HttpClient's, they would otherwise stay up for good, kept alive by PINGs).
        if (previous is not null)
        {
            foreach (var (id, old) in previous.Clusters)
            {
                if (!clusters.TryGetValue(id, out var kept) || !ReferenceEquals(kept, old))
                {
                    old.NativeTransport?.Dispose();
                }
            }
        }

        return new ProxySnapshot(routes, clusters, routePrints, clusterPrints) { RebuiltRoutes = rebuiltRoutes, RebuiltClusters = rebuiltClusters };
    }

    // NOTE: logged once the snapshot is published and the change token's listeners (the endpoints, the direct path's route
    // table) have taken it: a request sent after the line is routed by the new config.
    private void LogApplied(ProxySnapshot snapshot) =>
        Log.ConfigApplied(_logger, snapshot.Routes.Count, snapshot.Clusters.Count, snapshot.RebuiltRoutes, snapshot.RebuiltClusters);

    // NOTE: records compare their lists and dictionaries by reference, so change detection uses a
    // JSON rendering of the whole config instead: cheap, deterministic, and deep.
    private static string Fingerprint<T>(T config) => JsonSerializer.Serialize(config);

    public void Dispose() => _subscription?.Dispose();
}
