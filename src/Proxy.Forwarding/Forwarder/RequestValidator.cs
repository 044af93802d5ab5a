using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The forwarder's own check that a request is well-formed before any byte of it goes to a backend.
/// NOTE: the host server should already have rejected these (ours does, with RST_STREAM PROTOCOL_ERROR
/// or a 400), but the library runs on any server: Kestrel 10, for one, passes an HTTP/2 value with a
/// leading space and a :path containing a space through to the app. Forwarding such a request to an
/// HTTP/1.1 backend is how smuggling starts (RFC 9113 §8.2.1, §8.3.1; shared/design/ANCHORS.md).
/// </summary>
internal static class RequestValidator
{
    /// <summary>Returns why the request must not be forwarded, or null when it may be.</summary>
    public static string? FindMalformation(HttpContext context)
    {
        var request = context.Request;
        if (!HttpSyntax.IsToken(request.Method))
        {
            return "invalid method";
        }

        // The raw target, not the decoded Path: "/a%20b" is fine, "/a b" is not (RFC 9112 §3.2).
        var target = context.Features.Get<IHttpRequestFeature>()?.RawTarget ?? (request.Path + request.QueryString).ToString();
        if (target.AsSpan().IndexOfAnyExceptInRange('!', '~') >= 0)
        {
            return "invalid character in the request target";
        }

        foreach (var (name, values) in request.Headers)
        {
            if (name.Length == 0 || (name[0] != ':' && !HttpSyntax.IsToken(name)))
            {
                return "invalid header name";
            }

            foreach (var value in values)
            {
                if (value is not null && !IsValidFieldValue(value))
                {
                    return $"invalid value in header '{name}'";
                }
            }
        }

        return null;
    }

    /// <summary>RFC 9110 §5.5: no CR, LF or NUL anywhere; RFC 9113 §8.2.1: no leading or trailing SP/HTAB.</summary>
    private static bool IsValidFieldValue(string value)
    {
        if (value.Length > 0 && (IsWhitespace(value[0]) || IsWhitespace(value[^1])))
        {
            return false;
        }

        return value.AsSpan().IndexOfAny('\r', '\n', '\0') < 0;
    }

    private static bool IsWhitespace(char c) => c is ' ' or '\t';
}
