using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Transforms;

/// <summary>
/// The transformer of a configured route: the copy steps (each all, none or an allow list), then the route's transforms in
/// order. Both forwarder paths run the same steps: HttpRequestMessage/HttpResponseMessage for HttpClient, a request head
/// and a backend call for the native relay.
/// </summary>
// Immutable; shared by all requests of one route.
internal sealed class StructuredTransformer(
    HeaderCopy requestHeaders,
    HeaderCopy responseHeaders,
    HeaderCopy responseTrailers,
    bool useOriginalHost,
    IReadOnlyList<RequestTransform> requestTransforms,
    IReadOnlyList<ResponseHeaderTransform> responseTransforms) : HttpTransformer
{
    public override ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
    {
        if (requestHeaders.Enabled)
        {
            HeaderRules.CopyRequestHeaders(httpContext, proxyRequest, requestHeaders.Allowed);
        }

        var context = ApplyRequestTransforms(httpContext, new MessageRequestHeaders(proxyRequest), destinationPrefix);
        proxyRequest.RequestUri = MakeDestinationAddress(destinationPrefix, context.Path, context.QueryString);
        if (!string.Equals(context.Method, proxyRequest.Method.Method, StringComparison.Ordinal))
        {
            proxyRequest.Method = HttpMethod.Parse(context.Method);
        }

        if (useOriginalHost && httpContext.Request.Host.HasValue)
        {
            proxyRequest.Headers.Host = httpContext.Request.Host.Value;
        }
        else if (proxyRequest.Headers.Host is null && DestinationHost(httpContext) is { } host)
        {
            proxyRequest.Headers.Host = host;
        }

        return ValueTask.CompletedTask;
    }

    internal override bool TryTransformRequestNative(HttpContext httpContext, ForwarderRequestHead head, NativeDestination destination)
    {
        if (requestHeaders.Enabled)
        {
            HeaderRules.CopyRequestHeaders(httpContext, head, requestHeaders.Allowed);
        }

        FillNativeHead(new RequestTransformContext(httpContext, new HeadRequestHeaders(head), destination.Prefix), head, destination,
            httpContext.Request.Host, DestinationHost(httpContext));
        return true;
    }

    /// <summary>
    /// Both native paths: the route's transforms, then the target, the method and the authority (the original host when
    /// the route keeps it, else the destination's configured Host unless a transform set a Host field).
    /// </summary>
    private void FillNativeHead(RequestTransformContext context, ForwarderRequestHead head, NativeDestination destination, HostString originalHost,
        string? destinationHost)
    {
        ApplyRequestTransforms(context);
        head.PathAndQuery = destination.Target(context.Path, context.QueryString);
        head.Method = context.Method;
        if (useOriginalHost && originalHost.HasValue)
        {
            head.Authority = originalHost.Value;
        }
        else if (destinationHost is not null && !head.Headers.Exists(f => f.Key.Equals("Host", StringComparison.OrdinalIgnoreCase)))
        {
            // A Host field a transform set becomes the authority later (the forwarder's TakeHostField) and wins over this.
            head.Authority = destinationHost;
        }
    }

    /// <summary>Every request transform works without an HttpContext, and no response transform needs the pipeline's response.</summary>
    internal override bool SupportsDirect { get; } = responseTransforms.Count == 0 && requestTransforms.All(t => !t.NeedsHttpContext);

    internal override void TransformRequestDirect(TransformSource source, ForwarderRequestHead head, NativeDestination destination, string? destinationHost)
    {
        if (requestHeaders.Enabled)
        {
            HeaderRules.CopyRequestHeaders(source.Fields, head, requestHeaders.Allowed);
        }

        FillNativeHead(new RequestTransformContext(source, new HeadRequestHeaders(head), destination.Prefix), head, destination, source.Host, destinationHost);
    }

    internal override void TransformResponseDirect(ForwarderBackendCall call, ICollection<KeyValuePair<string, string>> headers, bool lowercase)
    {
        if (responseHeaders.Enabled)
        {
            HeaderRules.CopyResponseFields(call.ResponseHeaders, headers, responseHeaders.Allowed, lowercase);
        }
    }

    internal override void TransformTrailersDirect(ForwarderBackendCall call, ICollection<KeyValuePair<string, string>> trailers, bool lowercase)
    {
        if (responseTrailers.Enabled)
        {
            HeaderRules.CopyResponseFields(call.ResponseTrailers, trailers, responseTrailers.Allowed, lowercase);
        }
    }

    // YARP's destination Host: a fallback when no transform chose the host.
    private static string? DestinationHost(HttpContext httpContext) =>
        (httpContext.Features.Get<IReverseProxyFeature>() as ReverseProxyFeature)?.DestinationHost;

    private RequestTransformContext ApplyRequestTransforms(HttpContext httpContext, ProxyRequestHeaders headers, string destinationPrefix) =>
        ApplyRequestTransforms(new RequestTransformContext(httpContext, headers, destinationPrefix));

    private RequestTransformContext ApplyRequestTransforms(RequestTransformContext context)
    {
        for (var i = 0; i < requestTransforms.Count; i++) // indexed: foreach over the interface boxes an enumerator per request
        {
            requestTransforms[i].Apply(context);
        }

        return context;
    }

    internal override void TransformResponseNative(HttpContext httpContext, ForwarderBackendCall? call)
    {
        if (call is not null && responseHeaders.Enabled)
        {
            HeaderRules.CopyResponseHeaders(call.ResponseHeaders, httpContext.Response.Headers, responseHeaders.Allowed);
        }

        ApplyResponseTransforms(httpContext, httpContext.Response.Headers, trailers: false, call is not null);
    }

    internal override void TransformResponseTrailersNative(HttpContext httpContext, ForwarderBackendCall call)
    {
        if (httpContext.Features.Get<IHttpResponseTrailersFeature>()?.Trailers is { IsReadOnly: false } trailers)
        {
            if (responseTrailers.Enabled && call.ResponseTrailers.Count > 0)
            {
                HeaderRules.CopyResponseHeaders(call.ResponseTrailers, trailers, responseTrailers.Allowed);
            }

            ApplyResponseTransforms(httpContext, trailers, trailers: true, hasResponse: true);
        }
    }

    public override ValueTask<bool> TransformResponseAsync(HttpContext httpContext, HttpResponseMessage? proxyResponse, CancellationToken cancellationToken)
    {
        if (proxyResponse is not null && responseHeaders.Enabled)
        {
            HeaderRules.CopyResponseHeaders(proxyResponse, httpContext.Response.Headers, responseHeaders.Allowed);
        }

        ApplyResponseTransforms(httpContext, httpContext.Response.Headers, trailers: false, proxyResponse is not null);
        return ValueTask.FromResult(true);
    }

    public override ValueTask TransformResponseTrailersAsync(HttpContext httpContext, HttpResponseMessage proxyResponse, CancellationToken cancellationToken)
    {
        if (httpContext.Features.Get<IHttpResponseTrailersFeature>()?.Trailers is { IsReadOnly: false } trailers)
        {
            if (responseTrailers.Enabled)
            {
                HeaderRules.CopyTrailers(proxyResponse, trailers, responseTrailers.Allowed);
            }

            ApplyResponseTransforms(httpContext, trailers, trailers: true, hasResponse: true);
        }

        return ValueTask.CompletedTask;
    }

    private void ApplyResponseTransforms(HttpContext httpContext, IHeaderDictionary headers, bool trailers, bool hasResponse)
    {
        for (var i = 0; i < responseTransforms.Count; i++)
        {
            if (responseTransforms[i].IsTrailer == trailers)
            {
                responseTransforms[i].Apply(httpContext, headers, hasResponse);
            }
        }
    }
}
