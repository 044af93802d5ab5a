using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;

namespace Proxy.Forwarding.Transforms;

/// <summary>The backend request's header fields as transforms change them: an HttpRequestMessage, or a native request head.</summary>
internal abstract class ProxyRequestHeaders
{
    public abstract void Append(string name, string value);

    public abstract void Remove(string name);

    public abstract string? Get(string name);
}

/// <summary>Headers of an HttpRequestMessage (content headers go to its content, when it has one).</summary>
// Owned by one request's transform pass.
internal sealed class MessageRequestHeaders(HttpRequestMessage request) : ProxyRequestHeaders
{
    public override void Append(string name, string value)
    {
        if (!request.Headers.TryAddWithoutValidation(name, value))
        {
            request.Content?.Headers.TryAddWithoutValidation(name, value);
        }
    }

    public override void Remove(string name)
    {
        request.Headers.Remove(name);
        request.Content?.Headers.Remove(name);
    }

    public override string? Get(string name) =>
        request.Headers.NonValidated.TryGetValues(name, out var values) ? values.ToString() : null;
}

/// <summary>Headers of a native request head: an ordered field list, names compared case-insensitively.</summary>
// Owned by one request's transform pass.
internal sealed class HeadRequestHeaders(Forwarder.ForwarderRequestHead head) : ProxyRequestHeaders
{
    /// <summary>Adds a value to the field of that name ("a, b", as HttpRequestMessage headers join them), or a new field.</summary>
    public override void Append(string name, string value)
    {
        for (var i = 0; i < head.Headers.Count; i++)
        {
            if (string.Equals(head.Headers[i].Key, name, StringComparison.OrdinalIgnoreCase))
            {
                head.Headers[i] = new(head.Headers[i].Key, head.Headers[i].Value + ", " + value);
                return;
            }
        }

        head.Headers.Add(new(name, value));
    }

    public override void Remove(string name)
    {
        // A loop rather than RemoveAll: its predicate would capture name, a closure and a delegate per call.
        for (var i = head.Headers.Count - 1; i >= 0; i--)
        {
            if (string.Equals(head.Headers[i].Key, name, StringComparison.OrdinalIgnoreCase))
            {
                head.Headers.RemoveAt(i);
            }
        }
    }

    public override string? Get(string name) => Forwarder.HeaderRules.JoinedValue(head.Headers, name);
}

/// <summary>
/// The client request as transforms read it when there is no HttpContext (the direct path on our server): the decoded
/// path, the raw query and what the connection knows.
/// </summary>
internal abstract class TransformSource
{
    public abstract string Method { get; }

    public abstract PathString Path { get; }

    public abstract QueryString QueryString { get; }

    public abstract string Scheme { get; }

    public abstract HostString Host { get; }

    public abstract System.Net.IPAddress? RemoteIpAddress { get; }

    /// <summary><see cref="RemoteIpAddress"/> as text; a source may keep it per connection rather than format it per request.</summary>
    public virtual string? RemoteIpText => RemoteIpAddress?.ToString();

    public abstract System.Net.IPAddress? LocalIpAddress { get; }

    /// <summary>The request's header fields as received.</summary>
    public abstract IReadOnlyList<KeyValuePair<string, string>> Fields { get; }
}

/// <summary>What request transforms see and change. The target is built from Path and Query at the end.</summary>
// Owned by one request's transform pass.
internal sealed class RequestTransformContext
{
    private readonly HttpContext? _httpContext;
    private readonly TransformSource? _source;
    private readonly ProxyRequestHeaders _headers;
    private Dictionary<string, StringValues>? _query;

    public RequestTransformContext(HttpContext httpContext, ProxyRequestHeaders headers, string destinationPrefix)
    {
        _httpContext = httpContext;
        _headers = headers;
        DestinationPrefix = destinationPrefix;
        Path = httpContext.Request.Path;
        Method = httpContext.Request.Method;
    }

    public RequestTransformContext(TransformSource source, ProxyRequestHeaders headers, string destinationPrefix)
    {
        _source = source;
        _headers = headers;
        DestinationPrefix = destinationPrefix;
        Path = source.Path;
        Method = source.Method;
    }

    /// <summary>The request's HttpContext; only transforms that say <see cref="RequestTransform.NeedsHttpContext"/> use it.</summary>
    public HttpContext HttpContext => _httpContext ?? throw new InvalidOperationException("This request has no HttpContext (the direct path).");

    public string DestinationPrefix { get; }

    public PathString Path { get; set; }

    /// <summary>The method the backend request will carry (HttpMethodChange changes it).</summary>
    public string Method { get; set; }

    public string Scheme => _httpContext?.Request.Scheme ?? _source!.Scheme;

    public HostString Host => _httpContext?.Request.Host ?? _source!.Host;

    /// <summary>The app's path base (none on the direct path, which runs before any app).</summary>
    public PathString PathBase => _httpContext?.Request.PathBase ?? default;

    public System.Net.IPAddress? RemoteIpAddress => _httpContext is { } http ? http.Connection.RemoteIpAddress : _source!.RemoteIpAddress;

    /// <summary><see cref="RemoteIpAddress"/> as text (formatted once per connection on the direct path).</summary>
    public string? RemoteIpText => _httpContext is { } http ? http.Connection.RemoteIpAddress?.ToString() : _source!.RemoteIpText;

    public System.Net.IPAddress? LocalIpAddress => _httpContext is { } http ? http.Connection.LocalIpAddress : _source!.LocalIpAddress;

    /// <summary>The query, materialised only when a transform touches it.</summary>
    public Dictionary<string, StringValues> Query => _query ??= _httpContext is { } http
        ? http.Request.Query.ToDictionary(q => q.Key, q => q.Value, StringComparer.OrdinalIgnoreCase)
        : new Dictionary<string, StringValues>(Microsoft.AspNetCore.WebUtilities.QueryHelpers.ParseQuery(_source!.QueryString.Value), StringComparer.OrdinalIgnoreCase);

    public QueryString QueryString => _query is not null ? QueryString.Create(_query) : _httpContext?.Request.QueryString ?? _source!.QueryString;

    public void SetHeader(string name, string value)
    {
        RemoveHeader(name);
        AppendHeader(name, value);
    }

    public void AppendHeader(string name, string value) => _headers.Append(name, value);

    public void RemoveHeader(string name) => _headers.Remove(name);

    public string? GetHeader(string name) => _headers.Get(name);
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
    /// <summary>True when the transform reads what only an HttpContext has (route values, the client certificate): its route stays off the direct path.</summary>
    public virtual bool NeedsHttpContext => false;

    public abstract void Apply(RequestTransformContext context);
}

/// <summary>A response header or trailer transform.</summary>
internal sealed class ResponseHeaderTransform(string name, string? value, bool append, ResponseCondition when, bool trailer)
{
    public bool IsTrailer { get; } = trailer;

    /// <param name="hasResponse">False when the backend gave no response (the forwarder answers with an error).</param>
    public void Apply(HttpContext context, IHeaderDictionary headers, bool hasResponse)
    {
        var success = hasResponse && context.Response.StatusCode < 400;
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
