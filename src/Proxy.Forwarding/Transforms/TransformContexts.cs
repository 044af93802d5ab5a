using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;

namespace Proxy.Forwarding.Transforms;

/// <summary>What request transforms see and change. The URI is built from Path and Query at the end.</summary>
// Owned by one request's transform pass.
internal sealed class RequestTransformContext(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix)
{
    private Dictionary<string, StringValues>? _query;

    public HttpContext HttpContext { get; } = httpContext;

    public HttpRequestMessage ProxyRequest { get; } = proxyRequest;

    public string DestinationPrefix { get; } = destinationPrefix;

    public PathString Path { get; set; } = httpContext.Request.Path;

    /// <summary>The query, materialised only when a transform touches it.</summary>
    public Dictionary<string, StringValues> Query =>
        _query ??= HttpContext.Request.Query.ToDictionary(q => q.Key, q => q.Value, StringComparer.OrdinalIgnoreCase);

    public QueryString QueryString => _query is null ? HttpContext.Request.QueryString : QueryString.Create(_query);

    public void SetHeader(string name, string value)
    {
        RemoveHeader(name);
        AppendHeader(name, value);
    }

    public void AppendHeader(string name, string value)
    {
        if (!ProxyRequest.Headers.TryAddWithoutValidation(name, value))
        {
            ProxyRequest.Content?.Headers.TryAddWithoutValidation(name, value);
        }
    }

    public void RemoveHeader(string name)
    {
        ProxyRequest.Headers.Remove(name);
        ProxyRequest.Content?.Headers.Remove(name);
    }

    public string? GetHeader(string name) =>
        ProxyRequest.Headers.NonValidated.TryGetValues(name, out var values) ? values.ToString() : null;
}

/// <summary>When a response transform applies (YARP's "When").</summary>
internal enum ResponseCondition
{
    Success,
    Always,
    Failure,
}

/// <summary>A request transform.</summary>
internal abstract class RequestTransform
{
    public abstract void Apply(RequestTransformContext context);
}

/// <summary>A response header or trailer transform.</summary>
internal sealed class ResponseHeaderTransform(string name, string? value, bool append, ResponseCondition when, bool trailer)
{
    public bool IsTrailer { get; } = trailer;

    public void Apply(HttpContext context, IHeaderDictionary headers, HttpResponseMessage? response)
    {
        var success = response is not null && context.Response.StatusCode < 400;
        var applies = when switch
        {
            ResponseCondition.Always => true,
            ResponseCondition.Success => success,
            _ => !success,
        };
        if (!applies)
        {
            return;
        }

        if (value is null)
        {
            headers.Remove(name);
        }
        else if (append)
        {
            headers.Append(name, value);
        }
        else
        {
            headers[name] = value;
        }
    }
}
