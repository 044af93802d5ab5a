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
    public Task InvokeAsync(HttpContext context)
    {
        var route = context.GetEndpoint()?.Metadata.GetMetadata<RouteState>()
            ?? throw new InvalidOperationException("A proxy endpoint has no RouteState metadata.");
        var feature = new ReverseProxyFeature(route.RouteId, route.Config.ClusterId!);
        context.Features.Set<IReverseProxyFeature>(feature);
        // The cluster is looked up per request, so a reloaded cluster serves unchanged routes at once.
        manager.Current.Clusters.TryGetValue(feature.ClusterId, out var cluster);
        return ForwardAsync(new HttpContextFront(context), feature, route, cluster);
    }

    /// <summary>
    /// Forwards one request of <paramref name="route"/> to <paramref name="cluster"/> (null: it no longer exists): the
    /// body limit, destination choice and admission, then the forwarder. The ASP.NET Core endpoint and the direct path
    /// (Proxy.Relay, no HttpContext) both come here.
    /// </summary>
    internal Task ForwardAsync<TFront>(TFront front, ReverseProxyFeature feature, RouteState route, ClusterState? cluster)
        where TFront : IForwardingFront
        => TryForwardAtOnce(front, feature, route, cluster) ?? ForwardStepsAsync(front, feature, route, cluster, picked: null);

    /// <summary>
    /// The direct path's common case: a destination picked and a slot taken without waiting, then the forwarder's own task
    /// is the request's, and the forwarder runs this handler's end of the request (<see cref="ForwardEnd"/>). Null when
    /// anything needs the steps below (a refusal, an admission queue, the pipeline).
    /// </summary>
    /// <remarks>
    /// NOTE: the steps' async frame around the forwarder's was a state-machine box (about 250 bytes) and one more
    /// continuation for every direct request, though nothing before the forwarder waits in the common case.
    /// </remarks>
    private Task? TryForwardAtOnce<TFront>(TFront front, ReverseProxyFeature feature, RouteState route, ClusterState? cluster)
        where TFront : IForwardingFront
    {
        if (!front.EndsResponse || front.HttpContext is not null || cluster?.NativeTransport is not { } native || cluster.Affinity is not null
            || forwarder is not HttpForwarder ours)
        {
            return null;
        }
        AdmissionGate? taken = null;
        DestinationState? started = null;
        DestinationMetrics? counted = null;
        try
        {
            if (route.Config.MaxRequestBodySize is { } bodyLimit && !front.ApplyBodyLimit(bodyLimit))
            {
                return null; // refused by the steps (applying the limit again there changes nothing)
            }
            var available = cluster.AvailableDestinations();
            // NOTE: context is null only on the direct path, which takes only clusters with a built-in policy (none reads it).
            var destination = available.Count == 0 ? null : cluster.LoadBalancer.PickDestination(null!, cluster, available);
            if (destination is null)
            {
                return null;
            }
            var gate = destination.Gate;
            if (!gate.TryAcquire())
            {
                return ForwardStepsAsync(front, feature, route, cluster, picked: destination); // queue, or refuse, with the one picked
            }
            taken = gate;

            feature.DestinationId = destination.DestinationId;
            feature.DestinationHost = destination.Config.Host;
            var destinationMetrics = destination.Metrics ??= metrics.ForDestination(feature.ClusterId, destination.DestinationId);
            destination.RequestStarted();
            started = destination;
            destinationMetrics.RequestStarted();
            counted = destinationMetrics;
            var send = ours.SendDirectAsync(front, destination.Config.Address, ConfigOf(route, cluster), route.Transformer, native,
                new ForwardEnd(passiveHealth, cluster, destination, destinationMetrics, gate));
            return send.IsCompletedSuccessfully ? Task.CompletedTask : send.AsTask();
        }
        catch (Exception ex)
        {
            // As the steps do when something before the forwarder throws: what was taken is given back, the front answers.
            started?.RequestEnded();
            counted?.RequestEnded();
            taken?.Release();
            return front.EndAsync(ex).AsTask();
        }
    }

    /// <summary>The cluster's own config when the route changes nothing (no copy per request).</summary>
    private static ForwarderRequestConfig ConfigOf(RouteState route, ClusterState cluster) =>
        route.Config.ActivityTimeout is null && route.Config.Timeout == cluster.RequestConfig.Timeout
            ? cluster.RequestConfig
            : cluster.RequestConfig with
            {
                ActivityTimeout = route.Config.ActivityTimeout ?? cluster.RequestConfig.ActivityTimeout,
                Timeout = route.Config.Timeout,
            };

    private async Task ForwardStepsAsync<TFront>(TFront front, ReverseProxyFeature feature, RouteState route, ClusterState? cluster,
        DestinationState? picked)
        where TFront : IForwardingFront
    {
        Exception? failure = null;
        try
        {
            var clusterId = feature.ClusterId;
            if (route.Config.MaxRequestBodySize is { } bodyLimit && !front.ApplyBodyLimit(bodyLimit))
            {
                await RefuseAsync(front, feature, ForwarderError.RequestBodyClient,
                    $"The request body is larger than route '{route.RouteId}' accepts ({bodyLimit.ToString(CultureInfo.InvariantCulture)} bytes).", StatusCodes.Status413PayloadTooLarge);
                return;
            }

            if (cluster is null)
            {
                await RefuseAsync(front, feature, ForwarderError.NoAvailableDestinations, $"Cluster '{clusterId}' no longer exists.");
                return;
            }

            var available = cluster.AvailableDestinations();
            // Session affinity first: a request whose key names an available destination goes there, load balancing aside.
            // NOTE: the direct path takes no request of a cluster with affinity (it has no HttpContext to read the key from).
            var context = front.HttpContext;
            var (affinity, destination) = context is not null && cluster.Affinity is { } sessionAffinity
                ? sessionAffinity.Find(context, available)
                : (AffinityOutcome.NoKey, null);
            if (affinity == AffinityOutcome.Failed)
            {
                Log.AffinityFailed(logger, clusterId, cluster.Affinity!.Return503OnFailure ? SessionAffinityFailurePolicies.Return503Error : SessionAffinityFailurePolicies.Redistribute);
                if (cluster.Affinity.Return503OnFailure)
                {
                    await RefuseAsync(front, feature, ForwarderError.NoAvailableDestinations,
                        $"The session affinity key names no available destination of cluster '{clusterId}' (FailurePolicy {SessionAffinityFailurePolicies.Return503Error}).");
                    return;
                }
            }

            // NOTE: context is null only on the direct path, which takes only clusters with a built-in policy (none reads it).
            destination ??= picked ?? (available.Count == 0 ? null : cluster.LoadBalancer.PickDestination(context!, cluster, available));
            if (destination is not null && affinity != AffinityOutcome.Found && context is not null)
            {
                cluster.Affinity?.Affinitize(context, destination);
            }

            if (destination is null)
            {
                var reason = cluster.Destinations.Count == 0 || available.Count != 0
                    ? $"Cluster '{clusterId}' has no available destination."
                    : $"Cluster '{clusterId}' has no available destination: all {cluster.Destinations.Count} are unhealthy (AvailableDestinationsPolicy {(cluster.PanicWhenNoneAvailable ? AvailableDestinationsPolicies.HealthyOrPanic : AvailableDestinationsPolicies.HealthyAndUnknown)}).";
                await RefuseAsync(front, feature, ForwarderError.NoAvailableDestinations, reason);
                return;
            }

            feature.DestinationId = destination.DestinationId;
            feature.DestinationHost = destination.Config.Host;
            var destinationMetrics = destination.Metrics ??= metrics.ForDestination(clusterId, destination.DestinationId);
            var gate = destination.Gate;
            AdmissionResult admission;
            try
            {
                admission = await gate.AcquireAsync(destinationMetrics, front.RequestAborted);
            }
            catch (OperationCanceledException) when (front.RequestAborted.IsCancellationRequested)
            {
                return; // The client left while queued; there is nobody to answer.
            }

            if (admission != AdmissionResult.Admitted)
            {
                var reason = admission == AdmissionResult.QueueFull
                    ? $"Destination '{destination.DestinationId}' of cluster '{clusterId}' is at capacity and its queue is full."
                    : $"Destination '{destination.DestinationId}' of cluster '{clusterId}' had no free slot within {gate.QueueTimeout.TotalMilliseconds.ToString(CultureInfo.InvariantCulture)} ms.";
                await RefuseAsync(front, feature, admission == AdmissionResult.QueueFull ? ForwarderError.QueueFull : ForwarderError.QueueTimeout, reason);
                return;
            }

            destination.RequestStarted();
            destinationMetrics.RequestStarted();
            try
            {
                var config = ConfigOf(route, cluster);
                // The native transport (our own client connections) when the cluster has one; a replaced IHttpForwarder keeps its own path.
                ForwarderError error;
                if (context is null)
                {
                    // The direct path: only clusters on the native transport and our own forwarder come here.
                    error = await ((HttpForwarder)forwarder).SendDirectAsync(front, destination.Config.Address, config, route.Transformer, cluster.NativeTransport!);
                }
                else
                {
                    error = forwarder is HttpForwarder ours
                        ? await ours.SendAsync(context, destination.Config.Address, cluster.Invoker, config, route.Transformer, cluster.NativeTransport)
                        : await forwarder.SendAsync(context, destination.Config.Address, cluster.Invoker, config, route.Transformer);
                }

                // Passive health: a destination whose transport keeps failing is sat out for the
                // reactivation period instead of failing a share of all requests.
                // A gRPC call whose own grpc-timeout expired says nothing about the destination (tiny client deadlines would
                // otherwise sit healthy destinations out).
                passiveHealth.RequestCompleted(cluster, destination, error, front.ClientDeadlineExpired);
                // The request timeouts middleware (a route's TimeoutPolicy or Timeout under UseRequestTimeouts) answers with its
                // policy's status and body only when the endpoint throws; the forwarder's plain 504 stands for gRPC, whose
                // clients need the status in trailers.
                if (error == ForwarderError.RequestTimedOut && !front.HasStarted && !GrpcProtocol.IsGrpc(front.RequestContentType)
                    && front.RequestTimeout is { IsCancellationRequested: true } timedOut)
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
        catch (Exception ex) when (front.EndsResponse)
        {
            failure = ex;
        }
        finally
        {
            // The direct path: no server code runs after this task, so the front ends its response here (see IForwardingFront).
            if (front.EndsResponse)
            {
                await front.EndAsync(failure);
            }
        }
    }

    private async Task RefuseAsync<TFront>(TFront front, ReverseProxyFeature feature, ForwarderError error, string reason,
        int status = StatusCodes.Status503ServiceUnavailable)
        where TFront : IForwardingFront
    {
        var started = metrics.RequestStarted(feature.ClusterId);
        front.RecordError(error, null, clientDeadlineExpired: false);
        if (GrpcProtocol.IsGrpc(front.RequestContentType))
        {
            front.SetGrpcTrailersOnly(GrpcProtocol.StatusUnavailable, reason);
        }
        else
        {
            // An explicit reason beats a bare 503: the operator sees which pool is too small.
            try
            {
                await front.WriteTextResponseAsync(status, reason + "\n", front.RequestAborted);
            }
            catch (Exception) when (front.RequestAborted.IsCancellationRequested)
            {
                // The client left while we answered: the refusal below is still the outcome to report.
            }
        }

        Log.ForwardingFailed(logger, error, feature.RouteId, feature.ClusterId, feature.DestinationId, front.StatusCode, null);
        metrics.RequestEnded(started, feature.RouteId, feature.ClusterId, front.StatusCode, error);
    }
}

/// <summary>
/// What <see cref="ProxyEndpointHandler"/> does once the forwarder is done with a request it started at once (the direct
/// path): passive health, the destination's counts and its admission slot, then the front's end of the response. The
/// forwarder runs it in its own task's last step (<see cref="HttpForwarder"/>), in the order the endpoint's steps do.
/// </summary>
// Immutable; used once, by the forwarded request's flow.
internal readonly struct ForwardEnd(PassiveHealthChecker passiveHealth, ClusterState cluster, DestinationState destination, DestinationMetrics destinationMetrics,
    AdmissionGate gate)
{
    /// <summary>
    /// The forwarder returned <paramref name="error"/>, or threw <paramref name="failure"/>: records both, frees the slot, and
    /// turns a timeout of the request timeouts middleware into the failure the front answers (as the steps do).
    /// </summary>
    public void Ended<TFront>(TFront front, ForwarderError error, ref Exception? failure)
        where TFront : IForwardingFront
    {
        try
        {
            if (failure is null)
            {
                passiveHealth.RequestCompleted(cluster, destination, error, front.ClientDeadlineExpired);
                if (error == ForwarderError.RequestTimedOut && !front.HasStarted && !GrpcProtocol.IsGrpc(front.RequestContentType)
                    && front.RequestTimeout is { IsCancellationRequested: true } timedOut)
                {
                    failure = new OperationCanceledException("The route's request timeout expired.", timedOut);
                }
            }
        }
        finally
        {
            destination.RequestEnded();
            destinationMetrics.RequestEnded();
            gate.Release();
        }
    }
}
