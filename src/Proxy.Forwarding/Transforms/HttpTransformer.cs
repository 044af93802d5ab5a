using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Transforms;

/// <summary>
/// Shapes the backend request and the client response. The default copies headers (minus hop-by-hop
/// fields), targets <c>destinationPrefix + Path + Query</c>, and copies response headers and trailers.
/// Derive from it for one-off routes of the direct <see cref="IHttpForwarder"/> API.
/// </summary>
public class HttpTransformer
{
    /// <summary>The plain transformer: copy everything that may be copied, change nothing.</summary>
    public static HttpTransformer Default { get; } = new();

    /// <summary>Creates a transformer; derive to customise.</summary>
    protected HttpTransformer()
    {
    }

    /// <summary>Called before the request is sent: set headers, <c>RequestUri</c>, version.</summary>
    public virtual ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
    {
        HeaderRules.CopyRequestHeaders(httpContext, proxyRequest);
        proxyRequest.RequestUri ??= MakeDestinationAddress(destinationPrefix, httpContext.Request.Path, httpContext.Request.QueryString);
        return ValueTask.CompletedTask;
    }

    /// <summary>
    /// Called when the backend's response headers arrive (or with null when there is no response).
    /// Return false to skip copying the response body.
    /// </summary>
    public virtual ValueTask<bool> TransformResponseAsync(HttpContext httpContext, HttpResponseMessage? proxyResponse, CancellationToken cancellationToken)
    {
        if (proxyResponse is not null)
        {
            HeaderRules.CopyResponseHeaders(proxyResponse, httpContext.Response.Headers);
        }

        return ValueTask.FromResult(true);
    }

    /// <summary>Called after the response body: copies the trailers when the client can receive them.</summary>
    public virtual ValueTask TransformResponseTrailersAsync(HttpContext httpContext, HttpResponseMessage proxyResponse, CancellationToken cancellationToken)
    {
        var trailers = httpContext.Features.Get<IHttpResponseTrailersFeature>();
        if (trailers?.Trailers is { IsReadOnly: false } destination)
        {
            HeaderRules.CopyTrailers(proxyResponse, destination);
        }

        return ValueTask.CompletedTask;
    }

    // ---- The native transports' path: the same work on a ForwarderRequestHead and a ForwarderBackendCall ----

    /// <summary>
    /// Fills the native request head the way <see cref="TransformRequestAsync"/> fills an HttpRequestMessage. Returns false
    /// for a derived transformer, which only knows HttpRequestMessage: the forwarder then uses HttpClient for the request.
    /// </summary>
    internal virtual bool TryTransformRequestNative(HttpContext httpContext, ForwarderRequestHead head, NativeDestination destination)
    {
        if (GetType() != typeof(HttpTransformer))
        {
            return false;
        }

        HeaderRules.CopyRequestHeaders(httpContext, head);
        head.PathAndQuery = destination.Target(httpContext.Request.Path, httpContext.Request.QueryString);
        return true;
    }

    /// <summary>Copies the response head (minus hop-by-hop fields); <paramref name="call"/> is null when there is no response.</summary>
    internal virtual void TransformResponseNative(HttpContext httpContext, ForwarderBackendCall? call)
    {
        if (call is not null)
        {
            HeaderRules.CopyResponseHeaders(call.ResponseHeaders, httpContext.Response.Headers);
        }
    }

    /// <summary>Copies the trailers when the client can receive them.</summary>
    internal virtual void TransformResponseTrailersNative(HttpContext httpContext, ForwarderBackendCall call)
    {
        if (call.ResponseTrailers.Count > 0 && httpContext.Features.Get<IHttpResponseTrailersFeature>()?.Trailers is { IsReadOnly: false } destination)
        {
            HeaderRules.CopyResponseHeaders(call.ResponseTrailers, destination);
        }
    }

    // ---- The direct path's (Proxy.Relay: our server's exchange, no HttpContext) ----

    /// <summary>True when the direct path can run this transformer: it needs no HttpContext (a derived transformer may).</summary>
    internal virtual bool SupportsDirect => GetType() == typeof(HttpTransformer);

    /// <summary>Fills the backend head from <paramref name="source"/>, as <see cref="TryTransformRequestNative"/> does from an HttpContext.</summary>
    internal virtual void TransformRequestDirect(TransformSource source, ForwarderRequestHead head, NativeDestination destination, string? destinationHost)
    {
        HeaderRules.CopyRequestHeaders(source.Fields, head);
        head.PathAndQuery = destination.Target(source.Path, source.QueryString);
    }

    /// <summary>Copies the backend's response head into the client's (empty) field list.</summary>
    internal virtual void TransformResponseDirect(ForwarderBackendCall call, ICollection<KeyValuePair<string, string>> headers, bool lowercase) =>
        HeaderRules.CopyResponseFields(call.ResponseHeaders, headers, allowed: null, lowercase);

    /// <summary>Copies the backend's trailers into the client's (empty) trailer list.</summary>
    internal virtual void TransformTrailersDirect(ForwarderBackendCall call, ICollection<KeyValuePair<string, string>> trailers, bool lowercase) =>
        HeaderRules.CopyResponseFields(call.ResponseTrailers, trailers, allowed: null, lowercase);

    /// <summary>Joins a destination prefix (which may carry a base path) with a request path and query.</summary>
    public static Uri MakeDestinationAddress(string destinationPrefix, PathString path, QueryString query)
    {
        var prefix = destinationPrefix.EndsWith('/') ? destinationPrefix[..^1] : destinationPrefix;
        var pathText = path.HasValue ? path.ToUriComponent() : "/";
        return new Uri(prefix + pathText + query.ToUriComponent(), UriKind.Absolute);
    }
}
