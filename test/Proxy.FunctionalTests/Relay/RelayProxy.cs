using System.Collections.Concurrent;
using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.Configuration;
using Proxy.Forwarding;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// The proxy under test for the relay suite: our server (<see cref="ServerKind.ProxyServer"/>, which registers the native
/// relay) on 127.0.0.1:0 with TLS (ALPN h2), its routes and clusters from YARP-schema keys, and clients that speak
/// HTTP/2 to it.
/// </summary>
public static class RelayProxy
{
    /// <summary>Turns a hang into a failure on a busy 2-core CI machine; a working proxy never comes close.</summary>
    public static readonly TimeSpan Bound = TimeSpan.FromSeconds(30);

    /// <summary>
    /// Starts a proxy whose clusters are exactly <paramref name="keys"/>. When <paramref name="outcomes"/> is given, every
    /// forwarded request's outcome (the forwarder's <see cref="IForwarderErrorFeature"/>) is recorded there by path.
    /// </summary>
    public static Task<TestHost> StartAsync(ReverseProxyKeys keys, ForwardingOutcomes? outcomes = null) =>
        TestHost.StartAsync(ServerKind.ProxyServer, app =>
        {
            if (outcomes is not null)
            {
                app.Use(async (context, next) =>
                {
                    var path = context.Request.Path.Value ?? "";
                    try
                    {
                        await next(context);
                    }
                    finally
                    {
                        outcomes.Record(path, context.Features.Get<IForwarderErrorFeature>());
                    }
                });
            }

            app.MapProxyForwarding();
        }, https: true, configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(keys);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        });

    /// <summary>
    /// One route <c>/{routeId}/...</c> to cluster <paramref name="clusterId"/> with one destination, forwarded on the native
    /// relay ("Transport": "Native" fails validation without it, so a test can never pass on HttpClient by accident).
    /// </summary>
    public static ReverseProxyKeys NativeRoute(this ReverseProxyKeys keys, string routeId, string clusterId, string destination, bool h2c)
    {
        keys.Route(routeId, clusterId, $"/{routeId}/{{**rest}}").Destination(clusterId, destination)
            .ClusterSet(clusterId, "Transport", ForwarderTransports.Native);
        if (h2c)
        {
            keys.H2c(clusterId);
        }

        return keys;
    }

    /// <summary>An HttpClient that speaks HTTP/2 over TLS to <paramref name="proxy"/> (one connection unless configured otherwise).</summary>
    public static HttpClient CreateClient(TestHost proxy, Action<SocketsHttpHandler>? configure = null) =>
        TestClients.Create(proxy, HttpTransport.Http2Tls, Bound, configure);

    /// <summary>The HTTP/2 error code of the first <see cref="HttpProtocolException"/> in <paramref name="exception"/>'s chain, or null.</summary>
    public static long? Http2ErrorCode(Exception? exception)
    {
        for (var e = exception; e is not null; e = e.InnerException)
        {
            if (e is HttpProtocolException protocol)
            {
                return protocol.ErrorCode;
            }
        }

        return null;
    }
}

/// <summary>How the forwarder ended each request, by request path (recorded when the proxy's pipeline returned).</summary>
// Written by the proxy's request threads, read by the test; thread-safe.
public sealed class ForwardingOutcomes
{
    private readonly ConcurrentDictionary<string, TaskCompletionSource<(ForwarderError Error, Exception? Exception)>> _outcomes = new();

    internal void Record(string path, IForwarderErrorFeature? feature) =>
        Slot(path).TrySetResult(feature is null ? (ForwarderError.None, null) : (feature.Error, feature.Exception));

    /// <summary>The outcome of the request for <paramref name="path"/>, once the proxy finished it.</summary>
    public Task<(ForwarderError Error, Exception? Exception)> ForAsync(string path) => Slot(path).Task.WaitAsync(RelayProxy.Bound);

    /// <summary>Every outcome recorded so far, for failure messages.</summary>
    public string Describe() => string.Join("; ", _outcomes.Where(o => o.Value.Task.IsCompletedSuccessfully)
        .Select(o => $"{o.Key}: {o.Value.Task.Result.Error} {o.Value.Task.Result.Exception?.GetType().Name} {o.Value.Task.Result.Exception?.Message}"));

    private TaskCompletionSource<(ForwarderError, Exception?)> Slot(string path) =>
        _outcomes.GetOrAdd(path, _ => new(TaskCreationOptions.RunContinuationsAsynchronously));
}
