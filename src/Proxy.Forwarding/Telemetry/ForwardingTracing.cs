using System.Diagnostics;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Telemetry;

/// <summary>
/// The "Proxy.Forwarding" ActivitySource: one Client span per forwarded request (the proxy's call to the backend; the
/// ASP.NET Core hosting activity is the server span around it), and the W3C trace context the backend receives.
/// </summary>
/// <remarks>
/// <para>
/// NOTE: the backend request carries <c>traceparent</c>/<c>tracestate</c> naming OUR span as its parent, so the proxy hop
/// is visible in the trace; the client's own values were copied with the other headers and are replaced. Both paths
/// inject here: SocketsHttpHandler's propagator is switched off (BackendPoolFactory), so nothing injects twice.
/// </para>
/// <para>
/// When nobody listens to the source (or the sampler drops the span without asking for propagation), there is no span: no
/// allocation beyond <see cref="ActivitySource.HasListeners"/>, and the client's traceparent goes through unchanged.
/// </para>
/// </remarks>
// Static and stateless: ActivitySource is thread-safe.
internal static class ForwardingTracing
{
    public const string ActivitySourceName = "Proxy.Forwarding";

    public static readonly ActivitySource Source = new(ActivitySourceName);

    private const string TraceParent = "traceparent";
    private const string TraceState = "tracestate";

    /// <summary>Starts the span of one forwarded request, or returns null when nobody wants it.</summary>
    public static Activity? Start(HttpContext context, IReverseProxyFeature? proxy)
    {
        if (!Source.HasListeners())
        {
            return null;
        }

        var headers = context.Request.Headers;
        var traceParent = headers[TraceParent];
        var traceState = headers[TraceState];
        return Start(context.Request.Method, traceParent.Count == 1 ? traceParent[0] : null, traceState.Count == 1 ? traceState[0] : null, proxy);
    }

    /// <summary>The same for a request known by its field list (the direct path: no HttpContext, no hosting span).</summary>
    public static Activity? Start(string method, IReadOnlyList<KeyValuePair<string, string>> fields, IReverseProxyFeature? proxy)
    {
        if (!Source.HasListeners())
        {
            return null;
        }

        string? traceParent = null;
        string? traceState = null;
        var parents = 0;
        var states = 0;
        for (var i = 0; i < fields.Count; i++)
        {
            if (fields[i].Key.Equals(TraceParent, StringComparison.OrdinalIgnoreCase))
            {
                traceParent = fields[i].Value;
                parents++;
            }
            else if (fields[i].Key.Equals(TraceState, StringComparison.OrdinalIgnoreCase))
            {
                traceState = fields[i].Value;
                states++;
            }
        }

        return Start(method, parents == 1 ? traceParent : null, states == 1 ? traceState : null, proxy);
    }

    private static Activity? Start(string method, string? traceParent, string? traceState, IReverseProxyFeature? proxy)
    {
        Activity? activity;
        if (Activity.Current is null && traceParent is not null
            && ActivityContext.TryParse(traceParent, traceState, isRemote: true, out var parent))
        {
            // No server span (the host created no hosting activity): the client's trace context is the parent directly.
            activity = Source.StartActivity(method, ActivityKind.Client, parent);
        }
        else
        {
            activity = Source.StartActivity(method, ActivityKind.Client);
        }

        if (activity is { IsAllDataRequested: true })
        {
            activity.SetTag("http.request.method", method);
            activity.SetTag("proxy.route", proxy?.RouteId);
            activity.SetTag("proxy.cluster", proxy?.ClusterId);
            activity.SetTag("proxy.destination", proxy?.DestinationId);
        }

        return activity;
    }

    /// <summary>Ends the span with the outcome: the status sent to the client, and error.type when forwarding failed.</summary>
    public static void Stop(Activity activity, int statusCode, ForwarderError error)
    {
        if (activity.IsAllDataRequested)
        {
            activity.SetTag("http.response.status_code", statusCode);
            if (error != ForwarderError.None)
            {
                activity.SetTag("error.type", error.ToString());
                activity.SetStatus(ActivityStatusCode.Error);
            }
        }

        activity.Dispose();
    }

    /// <summary>The span of the request being forwarded on this async flow, if this source started it.</summary>
    public static Activity? Current => Activity.Current is { } current && ReferenceEquals(current.Source, Source) ? current : null;

    /// <summary>HttpClient path: the backend request's trace context becomes a child of <paramref name="activity"/>.</summary>
    public static void Inject(Activity activity, HttpRequestMessage request)
    {
        request.Headers.Remove(TraceParent);
        request.Headers.Remove(TraceState);
        request.Headers.TryAddWithoutValidation(TraceParent, activity.Id);
        if (activity.TraceStateString is { Length: > 0 } state)
        {
            request.Headers.TryAddWithoutValidation(TraceState, state);
        }
    }

    /// <summary>Native path: the same on a request head.</summary>
    public static void Inject(Activity activity, ForwarderRequestHead head)
    {
        head.Headers.RemoveAll(static h => h.Key.Equals(TraceParent, StringComparison.OrdinalIgnoreCase)
            || h.Key.Equals(TraceState, StringComparison.OrdinalIgnoreCase));
        head.Headers.Add(new(TraceParent, activity.Id!));
        if (activity.TraceStateString is { Length: > 0 } state)
        {
            head.Headers.Add(new(TraceState, state));
        }
    }
}
