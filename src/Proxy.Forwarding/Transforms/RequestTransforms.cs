using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Transforms;

internal sealed class PathPrefixTransform(PathString prefix) : RequestTransform
{
    public override void Apply(RequestTransformContext context) => context.Path = prefix.Add(context.Path);
}

internal sealed class PathRemovePrefixTransform(PathString prefix) : RequestTransform
{
    public override void Apply(RequestTransformContext context)
    {
        if (context.Path.StartsWithSegments(prefix, out var remainder))
        {
            context.Path = remainder;
        }
    }
}

internal sealed class PathSetTransform(PathString path) : RequestTransform
{
    public override void Apply(RequestTransformContext context) => context.Path = path;
}

/// <summary>Rebuilds the path from a template filled with the route's values (<c>/v2/{**rest}</c>).</summary>
internal sealed class PathPatternTransform(string pattern) : RequestTransform
{
    public override bool NeedsHttpContext => true; // the route values

    public override void Apply(RequestTransformContext context)
    {
        var values = context.HttpContext.Request.RouteValues;
        var result = new System.Text.StringBuilder();
        var i = 0;
        while (i < pattern.Length)
        {
            var open = pattern.IndexOf('{', i);
            if (open < 0)
            {
                result.Append(pattern, i, pattern.Length - i);
                break;
            }

            var close = pattern.IndexOf('}', open);
            result.Append(pattern, i, open - i);
            var name = pattern[(open + 1)..close].TrimStart('*');
            var colon = name.IndexOfAny([':', '=', '?']);
            if (colon >= 0)
            {
                name = name[..colon];
            }

            result.Append(values.TryGetValue(name, out var value) ? Convert.ToString(value, System.Globalization.CultureInfo.InvariantCulture) : "");
            i = close + 1;
        }

        var path = result.ToString();
        if (path.Length > 1 && path.EndsWith('/') && !pattern.EndsWith('/'))
        {
            // An empty catch-all leaves a trailing slash the template did not ask for.
            path = path.TrimEnd('/');
        }

        context.Path = new PathString(path.Length == 0 ? "/" : path);
    }
}

internal sealed class QueryParameterTransform(string name, string? value, bool append) : RequestTransform
{
    public override void Apply(RequestTransformContext context)
    {
        if (value is null)
        {
            context.Query.Remove(name);
        }
        else
        {
            SetOrAppend(context, name, value, append);
        }
    }

    public static void SetOrAppend(RequestTransformContext context, string name, string value, bool append)
    {
        if (append && context.Query.TryGetValue(name, out var existing))
        {
            context.Query[name] = Microsoft.Extensions.Primitives.StringValues.Concat(existing, value);
        }
        else
        {
            context.Query[name] = value;
        }
    }
}

internal sealed class RequestHeaderTransform(string name, string? value, bool append) : RequestTransform
{
    public override void Apply(RequestTransformContext context)
    {
        if (value is null)
        {
            context.RemoveHeader(name);
        }
        else if (append)
        {
            context.AppendHeader(name, value);
        }
        else
        {
            context.SetHeader(name, value);
        }
    }
}

/// <summary>What to do with one X-Forwarded-* header.</summary>
internal enum ForwardedAction
{
    Off,
    Set,
    Append,
    Remove,
}

/// <summary>X-Forwarded-For/Proto/Host/Prefix, each with its own action.</summary>
internal sealed class XForwardedTransform(string headerPrefix, ForwardedAction forAction, ForwardedAction proto, ForwardedAction host, ForwardedAction prefix)
    : RequestTransform
{
    // The names once per route, not four strings per request.
    private readonly string _forName = headerPrefix + "For";
    private readonly string _protoName = headerPrefix + "Proto";
    private readonly string _hostName = headerPrefix + "Host";
    private readonly string _prefixName = headerPrefix + "Prefix";

    public override void Apply(RequestTransformContext context)
    {
        ApplyOne(context, _forName, forAction, context.RemoteIpText);
        ApplyOne(context, _protoName, proto, context.Scheme);
        var requestHost = context.Host;
        ApplyOne(context, _hostName, host, requestHost.HasValue ? requestHost.ToUriComponent() : null);
        var pathBase = context.PathBase;
        ApplyOne(context, _prefixName, prefix, pathBase.HasValue ? pathBase.ToUriComponent() : null);
    }

    private static void ApplyOne(RequestTransformContext context, string name, ForwardedAction action, string? value)
    {
        switch (action)
        {
            case ForwardedAction.Set:
                context.RemoveHeader(name);
                if (value is not null)
                {
                    context.AppendHeader(name, value);
                }

                break;
            case ForwardedAction.Append when value is not null:
                context.AppendHeader(name, value);
                break;
            case ForwardedAction.Remove:
                context.RemoveHeader(name);
                break;
        }
    }
}

/// <summary>RFC 7239 <c>Forwarded</c>: for, proto, host and by, as IP addresses.</summary>
internal sealed class ForwardedTransform(bool forParam, bool proto, bool host, bool by, ForwardedAction action) : RequestTransform
{
    public override void Apply(RequestTransformContext context)
    {
        if (action == ForwardedAction.Off)
        {
            return;
        }

        if (action == ForwardedAction.Remove)
        {
            context.RemoveHeader("Forwarded");
            return;
        }

        var parts = new List<string>(4);
        if (by && context.LocalIpAddress is { } local)
        {
            parts.Add("by=" + Node(local));
        }

        if (forParam && context.RemoteIpAddress is { } remote)
        {
            parts.Add("for=" + Node(remote));
        }

        var requestHost = context.Host;
        if (host && requestHost.HasValue)
        {
            parts.Add("host=\"" + requestHost.ToUriComponent() + "\"");
        }

        if (proto)
        {
            parts.Add("proto=" + context.Scheme);
        }

        var value = string.Join(';', parts);
        if (action == ForwardedAction.Set)
        {
            context.SetHeader("Forwarded", value);
        }
        else
        {
            context.AppendHeader("Forwarded", value);
        }
    }

    // RFC 7239 §6: IPv6 nodes are bracketed and quoted.
    private static string Node(System.Net.IPAddress address) =>
        address.AddressFamily == System.Net.Sockets.AddressFamily.InterNetworkV6 ? $"\"[{address}]\"" : address.ToString();
}
