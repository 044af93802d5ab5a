using System.Buffers;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The forwarder's own check that a request is well-formed before any byte of it goes to a backend.
/// NOTE: the host server should already have rejected these (ours does, with RST_STREAM PROTOCOL_ERROR
/// or a 400), but the library runs on any server: Kestrel 10, for one, passes an HTTP/2 value with a
/// leading space and a :path containing a space through to the app. Forwarding such a request to an
/// HTTP/1.1 backend is how smuggling starts (RFC 9113 §8.2.1, §8.3.1; shared/design/ANCHORS.md).
/// The host and scheme are checked too: they become the backend's Host (when the original host is kept),
/// X-Forwarded-Host and X-Forwarded-Proto, so they must be the authority and scheme actually served.
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

        if (FindAuthorityMalformation(request, target) is { } authority)
        {
            return authority;
        }

        // RFC 3986 §3.1 (RFC 9113 §8.3.1 for :scheme); a server that allows alternate schemes passes the client's on.
        if (!IsScheme(request.Scheme))
        {
            return "invalid scheme";
        }

        // NOTE: a HeaderDictionary (our server's) is walked with its struct enumerator; through the interface the
        // enumerator is boxed, an allocation per request.
        if (request.Headers is HeaderDictionary headers)
        {
            foreach (var (name, values) in headers)
            {
                if (FindFieldMalformation(name, values) is { } field)
                {
                    return field;
                }
            }
        }
        else
        {
            foreach (var (name, values) in request.Headers)
            {
                if (FindFieldMalformation(name, values) is { } field)
                {
                    return field;
                }
            }
        }

        return null;
    }

    /// <summary>
    /// The same checks for a request known by its parts (the direct path: our server's exchange, whose engine already
    /// rejected most of these; kept so the two paths forward exactly the same requests).
    /// </summary>
    public static string? FindMalformation(string method, string rawTarget, string scheme, bool http2, string authority,
        IReadOnlyList<KeyValuePair<string, string>> fields)
    {
        if (!HttpSyntax.IsToken(method))
        {
            return "invalid method";
        }

        if (rawTarget.AsSpan().IndexOfAnyExceptInRange('!', '~') >= 0)
        {
            return "invalid character in the request target";
        }

        var hostFields = 0;
        for (var i = 0; i < fields.Count; i++)
        {
            var (name, value) = fields[i];
            if (FindFieldMalformation(name, value) is { } field)
            {
                return field;
            }

            if (!http2 && name.Equals("Host", StringComparison.OrdinalIgnoreCase))
            {
                hostFields++;
            }
        }

        if (hostFields > 1)
        {
            return "more than one Host header";
        }

        if (FindHostMalformation(authority.Length == 0 ? null : authority, http2 && IsHttpScheme(scheme), rawTarget) is { } host)
        {
            return host;
        }

        return IsScheme(scheme) ? null : "invalid scheme";
    }

    /// <summary>
    /// The Host the request is served for (ASP.NET Core's Request.Host is the Host field): one value at most, a valid
    /// uri-host [":" port] without userinfo (RFC 9110 §7.2, §4.2.4), and the same as ":authority" when a server shows
    /// that pseudo-header too (RFC 9113 §8.3.1: the recipient must not use Host then; Kestrel replaces Host, and so do we).
    /// </summary>
    private static string? FindFieldMalformation(string name, Microsoft.Extensions.Primitives.StringValues values)
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

        return null;
    }

    private static string? FindAuthorityMalformation(HttpRequest request, string target)
    {
        var hosts = request.Headers.Host;
        if (hosts.Count > 1)
        {
            return "more than one Host header";
        }

        var host = hosts.Count == 1 ? hosts[0] : null;
        // RFC 9113 §8.3.1: an http or https request "MUST contain either an :authority pseudo-header field or a Host
        // header field. If these fields are present, they MUST NOT be empty." (Kestrel 10 passes an empty :authority.)
        // HTTP/1.0 may omit Host, HTTP/1.1 may send it empty for a target without authority (RFC 9112 §3.2).
        var authorityRequired = (HttpProtocol.IsHttp2(request.Protocol) || HttpProtocol.IsHttp3(request.Protocol)) && IsHttpScheme(request.Scheme);
        if (FindHostMalformation(host, authorityRequired, target) is { } malformation)
        {
            return malformation;
        }

        if (request.Headers.TryGetValue(":authority", out var authorities))
        {
            if (authorities.Count != 1)
            {
                return "more than one :authority";
            }

            var authority = authorities[0] ?? "";
            if (authority.Contains('@'))
            {
                return "userinfo in the authority";
            }

            if (host is not null && !string.Equals(host, authority, StringComparison.OrdinalIgnoreCase))
            {
                return "Host header differs from :authority";
            }
        }

        return null;
    }

    /// <summary>
    /// The host the request is served for (null: none): present and not empty when <paramref name="authorityRequired"/>, a
    /// valid uri-host [":" port] without userinfo, and the same as an absolute-form target's authority.
    /// </summary>
    private static string? FindHostMalformation(string? host, bool authorityRequired, string target)
    {
        if (string.IsNullOrEmpty(host))
        {
            if (authorityRequired)
            {
                return "missing or empty :authority";
            }
        }
        else if (host.Contains('@'))
        {
            return "userinfo in the authority";
        }
        else if (!IsHost(host))
        {
            return "invalid Host header";
        }

        // RFC 9112 §3.2.2: an absolute-form target (a server may show it as RawTarget) names the authority itself.
        if (AbsoluteTargetAuthority(target) is { } targetAuthority)
        {
            if (targetAuthority.Contains('@'))
            {
                return "userinfo in the authority";
            }

            if (host is not null && !string.Equals(WithoutDefaultPort(host, target), WithoutDefaultPort(targetAuthority, target), StringComparison.OrdinalIgnoreCase))
            {
                return "Host header differs from the request target's authority";
            }
        }

        return null;
    }

    /// <summary>"h:1" of "http://h:1/p?q", or null when the target is not absolute-form with an authority.</summary>
    private static string? AbsoluteTargetAuthority(string target)
    {
        if (target.Length == 0 || target[0] == '/')
        {
            return null; // origin-form, the common case: no scan
        }

        var separator = target.IndexOf("://", StringComparison.Ordinal);
        if (separator <= 0 || !IsScheme(target[..separator]))
        {
            return null;
        }

        var start = separator + 3;
        var end = target.AsSpan(start).IndexOfAny('/', '?', '#');
        return end < 0 ? target[start..] : target.Substring(start, end);
    }

    /// <summary>The authority without the target scheme's default port (":80" for http, ":443" for https).</summary>
    private static string WithoutDefaultPort(string authority, string target)
    {
        var port = target.StartsWith("https:", StringComparison.OrdinalIgnoreCase) ? ":443"
            : target.StartsWith("http:", StringComparison.OrdinalIgnoreCase) ? ":80"
            : null;
        return port is not null && authority.EndsWith(port, StringComparison.Ordinal) ? authority[..^port.Length] : authority;
    }

    // RFC 3986 §3.2.2 uri-host [ ":" port ]: reg-name (unreserved, pct-encoded, sub-delims), IPv4, IP-literal in brackets.
    private static readonly SearchValues<char> HostChars =
        SearchValues.Create("!$%&'()*+,-.0123456789:;=ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz~");

    private static bool IsHost(string host) => host.AsSpan().IndexOfAnyExcept(HostChars) < 0;

    private static bool IsHttpScheme(string? scheme) =>
        string.Equals(scheme, "http", StringComparison.OrdinalIgnoreCase) || string.Equals(scheme, "https", StringComparison.OrdinalIgnoreCase);

    /// <summary>RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).</summary>
    private static bool IsScheme(string? scheme)
    {
        if (string.IsNullOrEmpty(scheme) || !char.IsAsciiLetter(scheme[0]))
        {
            return false;
        }

        foreach (var c in scheme.AsSpan(1))
        {
            if (!char.IsAsciiLetterOrDigit(c) && c is not ('+' or '-' or '.'))
            {
                return false;
            }
        }

        return true;
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
