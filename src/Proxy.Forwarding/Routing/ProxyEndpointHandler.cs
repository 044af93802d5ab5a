using System.Globalization;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.SessionAffinity;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Forwarding.Routing;

/// <summary>
/// The request delegate of every proxy endpoint: cluster lookup, destination choice, admission,
/// then the forwarder. Refusals (no destination, queue timeout) are answered here with a 503 and
/// a reason, or UNAVAILABLE for gRPC.
/// </summary>
// Stateless and shared.
internal sealed class ProxyEndpointHandler(ProxyStateManager manager, IHttpForwarder forwarder, PassiveHealthChecker passiveHealth,
    ForwardingMetrics metrics, ILogger<ProxyEndpointHandler> logger)
{
    public async Task InvokeAsync(HttpContext context)
    {
        var route = context.GetEndpoint()?.Metadata.GetMetadata<RouteState>()
            ?? throw new InvalidOperationException("A proxy endpoint has no RouteState metadata.");
        var clusterId = route.Config.ClusterId!;
        var feature = new ReverseProxyFeature(route.RouteId, clusterId);
        context.Features.Set<IReverseProxyFeature>(feature);
        if (route.Config.MaxRequestBodySize is { } bodyLimit && !ApplyBodyLimit(context, bodyLimit))
        {
            await RefuseAsync(context, feature, ForwarderError.RequestBodyClient,
                $"The request body is larger than route '{route.RouteId}' accepts ({bodyLimit.ToString(CultureInfo.InvariantCulture)} bytes).", StatusCodes.Status413PayloadTooLarge);
            return;
        }

        // The cluster is looked up per request, so a reloaded cluster serves unchanged routes at once.
        if (!manager.Current.Clusters.TryGetValue(clusterId, out var cluster))
        {
            await RefuseAsync(context, feature, ForwarderError.NoAvailableDestinations, $"Cluster '{clusterId}' no longer exists.");
            return;
        }

        var available = cluster.AvailableDestinations();
        // Session affinity first: a request whose key names an available destination goes there, load balancing aside.
        var (affinity, destination) = cluster.Affinity?.Find(context, available) ?? (AffinityOutcome.NoKey, null);
        if (affinity == AffinityOutcome.Failed)
        {
            Log.AffinityFailed(logger, clusterId, cluster.Affinity!.Return503OnFailure ? SessionAffinityFailurePolicies.Return503Error : SessionAffinityFailurePolicies.Redistribute);
            if (cluster.Affinity.Return503OnFailure)
            {
                await RefuseAsync(context, feature, ForwarderError.NoAvailableDestinations,
                    $"The session affinity key names no available destination of cluster '{clusterId}' (FailurePolicy {SessionAffinityFailurePolicies.Return503Error}).");
                return;
            }
        }

        destination ??= available.Count == 0 ? null : cluster.LoadBalancer.PickDestination(context, cluster, available);
        if (destination is not null && affinity != AffinityOutcome.Found)
        {
            cluster.Affinity?.Affinitize(context, destination);
        }

        if (destination is null)
        {
            var reason = cluster.Destinations.Count == 0 || available.Count != 0
                ? $"Cluster '{clusterId}' has no available destination."
                : $"Cluster '{clusterId}' has no available destination: all {cluster.Destinations.Count} are unhealthy (AvailableDestinationsPolicy {(cluster.PanicWhenNoneAvailable ? AvailableDestinationsPolicies.HealthyOrPanic : AvailableDestinationsPolicies.HealthyAndUnknown)}).";
            await RefuseAsync(context, feature, ForwarderError.NoAvailableDestinations, reason);
            return;
        }

        feature.DestinationId = destination.DestinationId;
        feature.DestinationHost = destination.Config.Host;
        var destinationMetrics = destination.Metrics ??= metrics.ForDestination(clusterId, destination.DestinationId);
        var gate = destination.Gate;
        AdmissionResult admission;
        try
        {
            admission = await gate.AcquireAsync(destinationMetrics, context.RequestAborted);
        }
        catch (OperationCanceledException) when (context.RequestAborted.IsCancellationRequested)
        {
            return; // The client left while queued; there is nobody to answer.
        }

        if (admission != AdmissionResult.Admitted)
        {
            var reason = admission == AdmissionResult.QueueFull
                ? $"Destination '{destination.DestinationId}' of cluster '{clusterId}' is at capacity and its queue is full."
                : $"Destination '{destination.DestinationId}' of cluster '{clusterId}' had no free slot within {gate.QueueTimeout.TotalMilliseconds.ToString(CultureInfo.InvariantCulture)} ms.";
            await RefuseAsync(context, feature, admission == AdmissionResult.QueueFull ? ForwarderError.QueueFull : ForwarderError.QueueTimeout, reason);
            return;
        }

        destination.RequestStarted();
        destinationMetrics.RequestStarted();
        try
        {
            // The cluster's own config when the route changes nothing (no copy per request).
            var config = route.Config.ActivityTimeout is null && route.Config.Timeout == cluster.RequestConfig.Timeout
                ? cluster.RequestConfig
                : cluster.RequestConfig with
                {
                    ActivityTimeout = route.Config.ActivityTimeout ?? cluster.RequestConfig.ActivityTimeout,
                    Timeout = route.Config.Timeout,
                };
            // The native transport (our own client connections) when the cluster has one; a replaced IHttpForwarder keeps its own path.
            var error = forwarder is HttpForwarder ours
                ? await ours.SendAsync(context, destination.Config.Address, cluster.Invoker, config, route.Transformer, cluster.NativeTransport)
                : await forwarder.SendAsync(context, destination.Config.Address, cluster.Invoker, config, route.Transformer);
            // Passive health: a destination whose transport keeps failing is sat out for the
            // reactivation period instead of failing a share of all requests.
            // A gRPC call whose own grpc-timeout expired says nothing about the destination (tiny client deadlines would
            // otherwise sit healthy destinations out).
            var clientDeadline = context.Features.Get<IForwarderErrorFeature>() is ForwarderErrorFeature { ClientDeadlineExpired: true };
            passiveHealth.RequestCompleted(cluster, destination, error, clientDeadline);
            // The request timeouts middleware (a route's TimeoutPolicy or Timeout under UseRequestTimeouts) answers with its
            // policy's status and body only when the endpoint throws; the forwarder's plain 504 stands for gRPC, whose
            // clients need the status in trailers.
            if (error == ForwarderError.RequestTimedOut && !context.Response.HasStarted && !GrpcProtocol.IsGrpc(context.Request.ContentType)
                && ForwardingCancellation.RequestTimeoutOf(context) is { IsCancellationRequested: true } timedOut)
            {
                throw new OperationCanceledException("The route's request timeout expired.", timedOut);
            }
        }
        finally
        {
            destination.RequestEnded();
            destinationMetrics.RequestEnded();
            gate.Release();
        }
    }

    /// <summary>
    /// Sets the route's MaxRequestBodySize on the server's per-request limit (-1 = none). False when the request declares a
    /// longer body: it is refused before a destination is chosen, so no backend sees any of it.
    /// </summary>
    private static bool ApplyBodyLimit(HttpContext context, long limit)
    {
        // Read-only once something read the body; the server's own limit then already applied.
        if (context.Features.Get<IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } size)
        {
            size.MaxRequestBodySize = limit < 0 ? null : limit;
        }

        return limit < 0 || !(context.Request.ContentLength > limit);
    }

    private async Task RefuseAsync(HttpContext context, ReverseProxyFeature feature, ForwarderError error, string reason,
        int status = StatusCodes.Status503ServiceUnavailable)
    {
        var started = metrics.RequestStarted(feature.ClusterId);
        context.Features.Set<IForwarderErrorFeature>(new ForwarderErrorFeature(error, null));
        var response = context.Response;
        if (GrpcProtocol.IsGrpc(context.Request.ContentType))
        {
            GrpcProtocol.SetTrailersOnlyResponse(response, GrpcProtocol.StatusUnavailable, reason);
        }
        else
        {
            // An explicit reason beats a bare 503: the operator sees which pool is too small.
            response.StatusCode = status;
            response.ContentType = "text/plain; charset=utf-8";
            try
            {
                await response.WriteAsync(reason + "\n", context.RequestAborted);
            }
            catch (Exception) when (context.RequestAborted.IsCancellationRequested)
            {
                // The client left while we answered: the refusal below is still the outcome to report.
            }
        }

        Log.ForwardingFailed(logger, error, feature.RouteId, feature.ClusterId, feature.DestinationId, response.StatusCode, null);
        metrics.RequestEnded(started, feature.RouteId, feature.ClusterId, response.StatusCode, error);
    }
}
