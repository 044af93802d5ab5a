using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Transforms;

/// <summary>The transformer of a configured route: header copy, then the route's transforms in order.</summary>
// Immutable; shared by all requests of one route.
internal sealed class StructuredTransformer(
    bool copyRequestHeaders,
    bool useOriginalHost,
    IReadOnlyList<RequestTransform> requestTransforms,
    IReadOnlyList<ResponseHeaderTransform> responseTransforms) : HttpTransformer
{
    public override ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
    {
        if (copyRequestHeaders)
        {
            HeaderRules.CopyRequestHeaders(httpContext, proxyRequest);
        }

        var context = new RequestTransformContext(httpContext, new MessageRequestHeaders(proxyRequest), destinationPrefix);
        foreach (var transform in requestTransforms)
        {
            transform.Apply(context);
        }

        proxyRequest.RequestUri = MakeDestinationAddress(destinationPrefix, context.Path, context.QueryString);
        if (useOriginalHost && httpContext.Request.Host.HasValue)
        {
            proxyRequest.Headers.Host = httpContext.Request.Host.Value;
        }

        return ValueTask.CompletedTask;
    }

    internal override bool TryTransformRequestNative(HttpContext httpContext, ForwarderRequestHead head, NativeDestination destination)
    {
        if (copyRequestHeaders)
        {
            HeaderRules.CopyRequestHeaders(httpContext, head);
        }

        var context = new RequestTransformContext(httpContext, new HeadRequestHeaders(head), destination.Prefix);
        foreach (var transform in requestTransforms)
        {
            transform.Apply(context);
        }

        head.PathAndQuery = destination.Target(context.Path, context.QueryString);
        if (useOriginalHost && httpContext.Request.Host.HasValue)
        {
            head.Authority = httpContext.Request.Host.Value;
        }

        return true;
    }

    internal override void TransformResponseNative(HttpContext httpContext, ForwarderBackendCall? call)
    {
        base.TransformResponseNative(httpContext, call);
        foreach (var transform in responseTransforms)
        {
            if (!transform.IsTrailer)
            {
                transform.Apply(httpContext, httpContext.Response.Headers, call is not null);
            }
        }
    }

    internal override void TransformResponseTrailersNative(HttpContext httpContext, ForwarderBackendCall call)
    {
        base.TransformResponseTrailersNative(httpContext, call);
        if (httpContext.Features.Get<IHttpResponseTrailersFeature>()?.Trailers is { IsReadOnly: false } trailers)
        {
            foreach (var transform in responseTransforms)
            {
                if (transform.IsTrailer)
                {
                    transform.Apply(httpContext, trailers, hasResponse: true);
                }
            }
        }
    }

    public override async ValueTask<bool> TransformResponseAsync(HttpContext httpContext, HttpResponseMessage? proxyResponse, CancellationToken cancellationToken)
    {
        var copyBody = await base.TransformResponseAsync(httpContext, proxyResponse, cancellationToken).ConfigureAwait(false);
        foreach (var transform in responseTransforms)
        {
            if (!transform.IsTrailer)
            {
                transform.Apply(httpContext, httpContext.Response.Headers, proxyResponse is not null);
            }
        }

        return copyBody;
    }

    public override async ValueTask TransformResponseTrailersAsync(HttpContext httpContext, HttpResponseMessage proxyResponse, CancellationToken cancellationToken)
    {
        await base.TransformResponseTrailersAsync(httpContext, proxyResponse, cancellationToken).ConfigureAwait(false);
        if (httpContext.Features.Get<IHttpResponseTrailersFeature>()?.Trailers is { IsReadOnly: false } trailers)
        {
            foreach (var transform in responseTransforms)
            {
                if (transform.IsTrailer)
                {
                    transform.Apply(httpContext, trailers, hasResponse: true);
                }
            }
        }
    }
}
