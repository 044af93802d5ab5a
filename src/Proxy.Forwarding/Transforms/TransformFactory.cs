using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Transforms;

/// <summary>
/// Turns YARP's transform dictionaries (<c>{ "RequestHeader": "X-A", "Set": "1" }</c>) into
/// transforms, reporting problems with their configuration key.
/// </summary>
internal static class TransformFactory
{
    public static void Validate(IReadOnlyDictionary<string, string> transform, string path, List<string> errors)
    {
        var builder = new Builder();
        Add(builder, transform, path, errors);
    }

    public static StructuredTransformer Build(IReadOnlyList<IReadOnlyDictionary<string, string>>? transforms)
    {
        var builder = new Builder();
        var errors = new List<string>();
        for (var i = 0; i < (transforms?.Count ?? 0); i++)
        {
            Add(builder, transforms![i], $"Transforms:{i}", errors);
        }

        if (errors.Count > 0)
        {
            // Validation runs first, so this only fires for a config that bypassed it.
            throw new InvalidOperationException(string.Join(Environment.NewLine, errors));
        }

        // YARP's default: X-Forwarded-* set unless the route configures X-Forwarded or Forwarded itself.
        if (!builder.ForwardedConfigured)
        {
            builder.Request.Add(new XForwardedTransform("X-Forwarded-", ForwardedAction.Set, ForwardedAction.Set, ForwardedAction.Set, ForwardedAction.Set));
        }

        return new StructuredTransformer(builder.RequestHeaders, builder.ResponseHeaders, builder.ResponseTrailers, builder.UseOriginalHost,
            builder.Request, builder.Response);
    }

    // Owned by one Build or Validate call.
    private sealed class Builder
    {
        public HeaderCopy RequestHeaders = HeaderCopy.All;
        public HeaderCopy ResponseHeaders = HeaderCopy.All;
        public HeaderCopy ResponseTrailers = HeaderCopy.All;
        public bool UseOriginalHost;
        public bool ForwardedConfigured;
        public readonly List<RequestTransform> Request = [];
        public readonly List<ResponseHeaderTransform> Response = [];
    }

    private static void Add(Builder b, IReadOnlyDictionary<string, string> t, string path, List<string> errors)
    {
        var d = new Dictionary<string, string>(t, StringComparer.OrdinalIgnoreCase);
        string Get(string key) => d[key];

        if (d.TryGetValue("PathPrefix", out var v) && Only(d, path, errors, "PathPrefix") && Path(v, path, "PathPrefix", errors))
        {
            b.Request.Add(new PathPrefixTransform(new PathString(v)));
        }
        else if (d.TryGetValue("PathRemovePrefix", out v) && Only(d, path, errors, "PathRemovePrefix") && Path(v, path, "PathRemovePrefix", errors))
        {
            b.Request.Add(new PathRemovePrefixTransform(new PathString(v)));
        }
        else if (d.TryGetValue("PathSet", out v) && Only(d, path, errors, "PathSet") && Path(v, path, "PathSet", errors))
        {
            b.Request.Add(new PathSetTransform(new PathString(v)));
        }
        else if (d.TryGetValue("PathPattern", out v) && Only(d, path, errors, "PathPattern") && Path(v, path, "PathPattern", errors))
        {
            b.Request.Add(new PathPatternTransform(v));
        }
        else if (d.TryGetValue("QueryValueParameter", out v) && SetOrAppend(d, path, errors, "QueryValueParameter", out var value, out var append))
        {
            b.Request.Add(new QueryParameterTransform(v, value, append));
        }
        else if (d.TryGetValue("QueryRemoveParameter", out v) && Only(d, path, errors, "QueryRemoveParameter"))
        {
            b.Request.Add(new QueryParameterTransform(v, null, false));
        }
        else if (d.TryGetValue("RequestHeader", out v) && SetOrAppend(d, path, errors, "RequestHeader", out value, out append))
        {
            b.Request.Add(new RequestHeaderTransform(v, value, append));
        }
        else if (d.TryGetValue("RequestHeaderRemove", out v) && Only(d, path, errors, "RequestHeaderRemove"))
        {
            b.Request.Add(new RequestHeaderTransform(v, null, false));
        }
        else if (d.TryGetValue("RequestHeadersCopy", out v) && Only(d, path, errors, "RequestHeadersCopy") && Bool(v, path, "RequestHeadersCopy", errors, out var copy))
        {
            b.RequestHeaders = copy ? HeaderCopy.All : HeaderCopy.None;
        }
        else if (d.TryGetValue("RequestHeadersAllowed", out v) && Only(d, path, errors, "RequestHeadersAllowed") && Tokens(v, path, "RequestHeadersAllowed", errors, out var names))
        {
            b.RequestHeaders = HeaderCopy.Only(names);
        }
        else if (d.TryGetValue("ResponseHeadersCopy", out v) && Only(d, path, errors, "ResponseHeadersCopy") && Bool(v, path, "ResponseHeadersCopy", errors, out copy))
        {
            b.ResponseHeaders = copy ? HeaderCopy.All : HeaderCopy.None;
        }
        else if (d.TryGetValue("ResponseHeadersAllowed", out v) && Only(d, path, errors, "ResponseHeadersAllowed") && Tokens(v, path, "ResponseHeadersAllowed", errors, out names))
        {
            b.ResponseHeaders = HeaderCopy.Only(names);
        }
        else if (d.TryGetValue("ResponseTrailersCopy", out v) && Only(d, path, errors, "ResponseTrailersCopy") && Bool(v, path, "ResponseTrailersCopy", errors, out copy))
        {
            b.ResponseTrailers = copy ? HeaderCopy.All : HeaderCopy.None;
        }
        else if (d.TryGetValue("ResponseTrailersAllowed", out v) && Only(d, path, errors, "ResponseTrailersAllowed") && Tokens(v, path, "ResponseTrailersAllowed", errors, out names))
        {
            b.ResponseTrailers = HeaderCopy.Only(names);
        }
        else if (d.TryGetValue("HttpMethodChange", out v) && Only(d, path, errors, "HttpMethodChange", "Set")
            && Required(d, path, "HttpMethodChange", "Set", errors, out var to)
            && Token(v, path, "HttpMethodChange", errors) & Token(to, path, "Set", errors))
        {
            b.Request.Add(new HttpMethodChangeTransform(v, to));
        }
        else if (d.TryGetValue("QueryRouteParameter", out v) && SetOrAppend(d, path, errors, "QueryRouteParameter", out value, out append)
            && NotEmpty(value, path, append ? "Append" : "Set", errors))
        {
            b.Request.Add(new QueryRouteParameterTransform(v, value!, append));
        }
        else if (d.TryGetValue("RequestHeaderRouteValue", out v) && SetOrAppend(d, path, errors, "RequestHeaderRouteValue", out value, out append)
            && Token(v, path, "RequestHeaderRouteValue", errors) & NotEmpty(value, path, append ? "Append" : "Set", errors))
        {
            b.Request.Add(new RequestHeaderRouteValueTransform(v, value!, append));
        }
        else if (d.TryGetValue("ClientCert", out v) && Only(d, path, errors, "ClientCert") && Token(v, path, "ClientCert", errors))
        {
            b.Request.Add(new ClientCertTransform(v));
        }
        else if (d.TryGetValue("RequestHeaderOriginalHost", out v) && Only(d, path, errors, "RequestHeaderOriginalHost") && Bool(v, path, "RequestHeaderOriginalHost", errors, out var original))
        {
            b.UseOriginalHost = original;
        }
        else if ((d.ContainsKey("ResponseHeader") || d.ContainsKey("ResponseTrailer"))
            && SetOrAppend(d, path, errors, d.ContainsKey("ResponseHeader") ? "ResponseHeader" : "ResponseTrailer", out value, out append, "When")
            && When(d, path, errors, out var when))
        {
            var trailer = !d.ContainsKey("ResponseHeader");
            b.Response.Add(new ResponseHeaderTransform(Get(trailer ? "ResponseTrailer" : "ResponseHeader"), value, append, when, trailer));
        }
        else if ((d.ContainsKey("ResponseHeaderRemove") || d.ContainsKey("ResponseTrailerRemove"))
            && Only(d, path, errors, d.ContainsKey("ResponseHeaderRemove") ? "ResponseHeaderRemove" : "ResponseTrailerRemove", "When")
            && When(d, path, errors, out when))
        {
            var trailer = !d.ContainsKey("ResponseHeaderRemove");
            b.Response.Add(new ResponseHeaderTransform(Get(trailer ? "ResponseTrailerRemove" : "ResponseHeaderRemove"), null, false, when, trailer));
        }
        else if (d.TryGetValue("X-Forwarded", out v) && Only(d, path, errors, "X-Forwarded", "For", "Proto", "Host", "Prefix", "HeaderPrefix")
            && Action(v, path, "X-Forwarded", errors, out var all))
        {
            var ok = Action(d.GetValueOrDefault("For", v), path, "For", errors, out var forA)
                & Action(d.GetValueOrDefault("Proto", v), path, "Proto", errors, out var protoA)
                & Action(d.GetValueOrDefault("Host", v), path, "Host", errors, out var hostA)
                & Action(d.GetValueOrDefault("Prefix", v), path, "Prefix", errors, out var prefixA);
            b.ForwardedConfigured = true;
            if (ok)
            {
                b.Request.Add(new XForwardedTransform(d.GetValueOrDefault("HeaderPrefix", "X-Forwarded-"), forA, protoA, hostA, prefixA));
            }
        }
        else if (d.TryGetValue("Forwarded", out v) && Only(d, path, errors, "Forwarded", "Action", "ForFormat", "ByFormat")
            && Action(d.GetValueOrDefault("Action", "Set"), path, "Action", errors, out var action))
        {
            var parts = v.Split(',', StringSplitOptions.TrimEntries | StringSplitOptions.RemoveEmptyEntries).Select(p => p.ToLowerInvariant()).ToHashSet();
            foreach (var unknown in parts.Except(["for", "proto", "host", "by"]))
            {
                errors.Add($"{path}:Forwarded: '{unknown}' is not one of for, proto, host, by.");
            }

            b.ForwardedConfigured = true;
            b.Request.Add(new ForwardedTransform(parts.Contains("for"), parts.Contains("proto"), parts.Contains("host"), parts.Contains("by"), action));
        }
        else if (d.Count == 0)
        {
            errors.Add($"{path}: empty transform.");
        }
        else if (!IsKnown(d))
        {
            errors.Add($"{path}: unknown transform '{string.Join("', '", d.Keys)}'.");
        }
    }

    private static bool IsKnown(Dictionary<string, string> d) =>
        d.Keys.Any(k => k is "PathPrefix" or "PathRemovePrefix" or "PathSet" or "PathPattern" or "QueryValueParameter"
            or "QueryRemoveParameter" or "RequestHeader" or "RequestHeaderRemove" or "RequestHeadersCopy" or "RequestHeaderOriginalHost"
            or "ResponseHeader" or "ResponseTrailer" or "ResponseHeaderRemove" or "ResponseTrailerRemove" or "X-Forwarded" or "Forwarded"
            or "RequestHeadersAllowed" or "ResponseHeadersCopy" or "ResponseHeadersAllowed" or "ResponseTrailersCopy" or "ResponseTrailersAllowed"
            or "HttpMethodChange" or "QueryRouteParameter" or "RequestHeaderRouteValue" or "ClientCert");

    private static bool Only(Dictionary<string, string> d, string path, List<string> errors, params string[] allowed)
    {
        var extra = d.Keys.Where(k => !allowed.Contains(k, StringComparer.OrdinalIgnoreCase)).ToList();
        if (extra.Count == 0)
        {
            return true;
        }

        errors.Add($"{path}: unexpected key(s) '{string.Join("', '", extra)}' for transform '{allowed[0]}'.");
        return false;
    }

    private static bool SetOrAppend(Dictionary<string, string> d, string path, List<string> errors, string kind,
        out string? value, out bool append, string? optional = null)
    {
        append = d.TryGetValue("Append", out value);
        var set = d.TryGetValue("Set", out var setValue);
        if (append == set)
        {
            errors.Add($"{path}: transform '{kind}' needs exactly one of 'Set' or 'Append'.");
            return false;
        }

        value = append ? value : setValue;
        return optional is null ? Only(d, path, errors, kind, "Set", "Append") : Only(d, path, errors, kind, "Set", "Append", optional);
    }

    private static bool When(Dictionary<string, string> d, string path, List<string> errors, out ResponseCondition when)
    {
        when = ResponseCondition.Success;
        if (!d.TryGetValue("When", out var text))
        {
            return true;
        }

        if (Enum.TryParse(text, ignoreCase: true, out when) && Enum.IsDefined(when))
        {
            return true;
        }

        errors.Add($"{path}:When: '{text}' is not one of Success, Always, Failure.");
        return false;
    }

    private static bool Action(string text, string path, string key, List<string> errors, out ForwardedAction action)
    {
        if (Enum.TryParse(text, ignoreCase: true, out action) && Enum.IsDefined(action))
        {
            return true;
        }

        errors.Add($"{path}:{key}: '{text}' is not one of Set, Append, Remove, Off.");
        return false;
    }

    private static bool Bool(string text, string path, string key, List<string> errors, out bool value)
    {
        if (bool.TryParse(text, out value))
        {
            return true;
        }

        errors.Add($"{path}:{key}: '{text}' is not 'true' or 'false'.");
        return false;
    }

    private static bool Required(Dictionary<string, string> d, string path, string kind, string key, List<string> errors, out string value)
    {
        if (d.TryGetValue(key, out value!))
        {
            return true;
        }

        errors.Add($"{path}: transform '{kind}' needs '{key}'.");
        return false;
    }

    private static bool NotEmpty(string? text, string path, string key, List<string> errors)
    {
        if (!string.IsNullOrWhiteSpace(text))
        {
            return true;
        }

        errors.Add($"{path}:{key}: a route value name is required.");
        return false;
    }

    // RFC 9110 §5.1 and §9.1: field names and methods are tokens.
    private static bool Token(string text, string path, string key, List<string> errors)
    {
        if (Forwarder.HttpSyntax.IsToken(text))
        {
            return true;
        }

        errors.Add($"{path}:{key}: '{text}' is not a valid token (RFC 9110 §5.6.2).");
        return false;
    }

    private static bool Tokens(string text, string path, string key, List<string> errors, out string[] names)
    {
        names = HeaderCopy.ParseList(text);
        var bad = names.Where(n => !Forwarder.HttpSyntax.IsToken(n)).ToList();
        if (bad.Count == 0)
        {
            return true;
        }

        errors.Add($"{path}:{key}: '{string.Join("', '", bad)}' is not a valid header name (expected names separated by ';').");
        return false;
    }

    private static bool Path(string text, string path, string key, List<string> errors)
    {
        if (text.StartsWith('/'))
        {
            return true;
        }

        errors.Add($"{path}:{key}: '{text}' must start with '/'.");
        return false;
    }
}
