using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Matching;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.LoadBalancing;
using Proxy.Forwarding.Routing;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding;

/// <summary>Configures the forwarding services further (where the config comes from, extra policies).</summary>
public interface IProxyForwardingBuilder
{
    /// <summary>The service collection.</summary>
    IServiceCollection Services { get; }
}

internal sealed class ProxyForwardingBuilder(IServiceCollection services) : IProxyForwardingBuilder
{
    public IServiceCollection Services { get; } = services;
}

/// <summary>Registration and mapping of the forwarding layer.</summary>
public static class ProxyForwardingExtensions
{
    /// <summary>
    /// Adds the forwarder, the load balancing policies and the routing pieces. Follow with
    /// <see cref="LoadFromConfig"/> or <see cref="LoadFromMemory"/> to use configured routes;
    /// <see cref="IHttpForwarder"/> alone needs nothing more.
    /// </summary>
    public static IProxyForwardingBuilder AddProxyForwarding(this IServiceCollection services)
    {
        services.AddRouting();
        services.AddMetrics();
        services.TryAddSingleton<ForwardingMetrics>();
        services.TryAddSingleton<IBackendConnectionMetrics>(sp => sp.GetRequiredService<ForwardingMetrics>());
        services.TryAddSingleton<IHttpForwarder, HttpForwarder>();
        services.TryAddSingleton<ProxyStateManager>();
        services.TryAddSingleton<RoutePolicyValidator>();
        // Session affinity's Cookie and CustomHeader keys are protected with the app's key ring.
        services.AddDataProtection();
        services.TryAddSingleton<ProxyEndpointHandler>();
        services.TryAddSingleton<PassiveHealthChecker>();
        services.AddOptions<TransportFailureRateHealthPolicyOptions>();
        services.TryAddSingleton(TimeProvider.System);
        services.TryAddEnumerable(ServiceDescriptor.Singleton<Microsoft.Extensions.Hosting.IHostedService, ActiveHealthChecker>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<MatcherPolicy, RequestMatchersPolicy>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<ILoadBalancingPolicy, PowerOfTwoChoicesPolicy>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<ILoadBalancingPolicy, RoundRobinPolicy>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<ILoadBalancingPolicy, RandomPolicy>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<ILoadBalancingPolicy, LeastRequestsPolicy>());
        services.TryAddEnumerable(ServiceDescriptor.Singleton<ILoadBalancingPolicy, FirstAlphabeticalPolicy>());
        return new ProxyForwardingBuilder(services);
    }

    /// <summary>
    /// Reads routes and clusters from a section in YARP's schema (usually <c>ReverseProxy</c>),
    /// and reloads when the configuration reloads. Validation messages name the key and, when the
    /// section belongs to the app's configuration, the file (or other source) that supplied it.
    /// </summary>
    public static IProxyForwardingBuilder LoadFromConfig(this IProxyForwardingBuilder builder, IConfiguration section)
    {
        builder.Services.RemoveAll<IProxyConfigProvider>();
        builder.Services.AddSingleton<IProxyConfigProvider>(services => new ConfigurationConfigProvider(
            section, section as IConfigurationRoot ?? services.GetService<IConfiguration>() as IConfigurationRoot,
            services.GetService<Microsoft.Extensions.Logging.ILogger<ConfigurationConfigProvider>>()));
        return builder;
    }

    /// <summary>Uses an in-memory configuration; resolve <see cref="InMemoryConfigProvider"/> to update it.</summary>
    public static IProxyForwardingBuilder LoadFromMemory(this IProxyForwardingBuilder builder, IReadOnlyList<RouteConfig> routes, IReadOnlyList<ClusterConfig> clusters)
    {
        var provider = new InMemoryConfigProvider(routes, clusters);
        builder.Services.RemoveAll<IProxyConfigProvider>();
        builder.Services.AddSingleton(provider);
        builder.Services.AddSingleton<IProxyConfigProvider>(provider);
        return builder;
    }

    /// <summary>
    /// Loads the configuration (throwing <see cref="ProxyConfigException"/>, with every offending key,
    /// when it is invalid) and maps one endpoint per route.
    /// </summary>
    public static IEndpointConventionBuilder MapProxyForwarding(this IEndpointRouteBuilder endpoints)
    {
        var services = endpoints.ServiceProvider;
        var manager = services.GetRequiredService<ProxyStateManager>();
        manager.Initialize();
        var handler = services.GetRequiredService<ProxyEndpointHandler>();
        var dataSource = new ProxyEndpointDataSource(manager, handler.InvokeAsync);
        endpoints.DataSources.Add(dataSource);
        return dataSource;
    }
}
