using System.Globalization;

namespace Proxy.Forwarding.Transforms;

/// <summary>YARP's HttpMethodChange: requests made with one method go to the backend with another.</summary>
internal sealed class HttpMethodChangeTransform(string from, string to) : RequestTransform
{
    // As HttpMethod compares them (YARP's behaviour): "get" in config matches a GET request.
    public override void Apply(RequestTransformContext context)
    {
        if (string.Equals(context.Method, from, StringComparison.OrdinalIgnoreCase))
        {
            context.Method = to;
        }
    }
}

/// <summary>YARP's QueryRouteParameter: a query parameter set or appended from a route value (nothing when the route has none).</summary>
internal sealed class QueryRouteParameterTransform(string name, string routeValue, bool append) : RequestTransform
{
    public override bool NeedsHttpContext => true;

    public override void Apply(RequestTransformContext context)
    {
        if (RouteValue.Get(context, routeValue) is { } value)
        {
            QueryParameterTransform.SetOrAppend(context, name, value, append);
        }
    }
}

/// <summary>YARP's RequestHeaderRouteValue: a request header set or appended from a route value (nothing when the route has none).</summary>
internal sealed class RequestHeaderRouteValueTransform(string header, string routeValue, bool append) : RequestTransform
{
    public override bool NeedsHttpContext => true;

    public override void Apply(RequestTransformContext context)
    {
        if (RouteValue.Get(context, routeValue) is { } value)
        {
            if (append)
            {
                context.AppendHeader(header, value);
            }
            else
            {
                context.SetHeader(header, value);
            }
        }
    }
}

/// <summary>
/// YARP's ClientCert: the TLS client certificate, base64 DER, in the named header. The client's own header of that name is
/// always removed first, so a client without a certificate cannot forge one.
/// </summary>
internal sealed class ClientCertTransform(string header) : RequestTransform
{
    public override bool NeedsHttpContext => true;

    public override void Apply(RequestTransformContext context)
    {
        context.RemoveHeader(header);
        if (context.HttpContext.Connection.ClientCertificate is { } certificate)
        {
            context.AppendHeader(header, Convert.ToBase64String(certificate.RawData));
        }
    }
}

internal static class RouteValue
{
    /// <summary>The route value as text, or null when the route has none (or an empty one).</summary>
    public static string? Get(RequestTransformContext context, string name) =>
        context.HttpContext.Request.RouteValues.TryGetValue(name, out var value)
        && Convert.ToString(value, CultureInfo.InvariantCulture) is { Length: > 0 } text ? text : null;
}
