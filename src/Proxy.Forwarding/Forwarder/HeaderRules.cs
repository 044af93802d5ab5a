using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// Which headers a proxy must not forward, and how to copy the rest between ASP.NET Core and
/// HttpClient messages.
/// </summary>
internal static class HeaderRules
{
    /// <summary>
    /// True when the name must never be copied in either direction: RFC 9110 §7.6.1's Connection and the fields it
    /// names are for the immediate connection only, RFC 9113 §8.2.2 forbids the connection-specific fields in HTTP/2
    /// entirely, Host is the transport's to set, and a pseudo-header is never a field. Any case.
    /// </summary>
    /// <remarks>Asked for every field of every request and response: the length picks the one or two names to compare, no hashing.</remarks>
    public static bool IsHopByHop(string name) => name.Length switch
    {
        0 => false,
        2 => name.Equals("TE", StringComparison.OrdinalIgnoreCase),
        4 => name.Equals("Host", StringComparison.OrdinalIgnoreCase),
        7 => name.Equals("Upgrade", StringComparison.OrdinalIgnoreCase) || name.Equals("Trailer", StringComparison.OrdinalIgnoreCase),
        10 => name.Equals("Connection", StringComparison.OrdinalIgnoreCase) || name.Equals("Keep-Alive", StringComparison.OrdinalIgnoreCase),
        16 => name.Equals("Proxy-Connection", StringComparison.OrdinalIgnoreCase),
        17 => name.Equals("Transfer-Encoding", StringComparison.OrdinalIgnoreCase),
        _ => false,
    } || (name.Length > 0 && name[0] == ':');

    /// <summary>The field names the Connection header lists (they are hop-by-hop too).</summary>
    public static HashSet<string>? ConnectionListed(StringValues connection)
    {
        if (StringValues.IsNullOrEmpty(connection))
        {
            return null;
        }

        var names = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var value in connection)
        {
            foreach (var token in (value ?? "").Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
            {
                names.Add(token);
            }
        }

        return names;
    }

    /// <summary>
    /// Copies the client's request headers to the backend request, minus hop-by-hop fields; with <paramref name="allowed"/>,
    /// only the names it holds (RequestHeadersAllowed; hop-by-hop fields stay out even when listed).
    /// </summary>
    public static void CopyRequestHeaders(HttpContext context, HttpRequestMessage proxyRequest, IReadOnlySet<string>? allowed = null)
    {
        var headers = context.Request.Headers;
        var listed = ConnectionListed(headers.Connection);
        foreach (var (name, values) in headers)
        {
            if (IsHopByHop(name) || listed?.Contains(name) == true || allowed?.Contains(name) == false)
            {
                continue;
            }

            AddRequestHeader(proxyRequest, name, values);
        }

        // RFC 9110 §10.1.4: TE is hop-by-hop, but "trailers" must reach a gRPC backend (YARP #1191
        // once stripped it); other codings are not ours to accept for the backend.
        if (allowed?.Contains("TE") != false && headers.TryGetValue("TE", out var te) && listed?.Contains("TE") != true)
        {
            // Every gRPC call sends "TE: trailers": check the list without splitting it into strings.
            var found = false;
            foreach (var value in te)
            {
                var span = value.AsSpan();
                foreach (var range in span.Split(','))
                {
                    if (span[range].Trim().Equals("trailers", StringComparison.OrdinalIgnoreCase))
                    {
                        found = true;
                        break;
                    }
                }

                if (found)
                {
                    proxyRequest.Headers.TryAddWithoutValidation("TE", "trailers");
                    break;
                }
            }
        }
    }

    // Content headers in HttpClient's sense: they only travel with a body (a GET without one sends no Content-Type),
    // and the native path keeps that behaviour.
    // NOTE: a switch on the length, not a case-insensitive HashSet: every forwarded field is asked, and hashing each name
    // case-insensitively cost more than these few comparisons.
    internal static bool IsContentHeader(string name) => name.Length switch
    {
        5 => name.Equals("Allow", StringComparison.OrdinalIgnoreCase),
        7 => name.Equals("Expires", StringComparison.OrdinalIgnoreCase),
        11 => name.Equals("Content-MD5", StringComparison.OrdinalIgnoreCase),
        12 => name.Equals("Content-Type", StringComparison.OrdinalIgnoreCase),
        13 => name.Equals("Content-Range", StringComparison.OrdinalIgnoreCase) || name.Equals("Last-Modified", StringComparison.OrdinalIgnoreCase),
        14 => name.Equals("Content-Length", StringComparison.OrdinalIgnoreCase),
        16 => name.Equals("Content-Encoding", StringComparison.OrdinalIgnoreCase) || name.Equals("Content-Language", StringComparison.OrdinalIgnoreCase)
            || name.Equals("Content-Location", StringComparison.OrdinalIgnoreCase),
        19 => name.Equals("Content-Disposition", StringComparison.OrdinalIgnoreCase),
        _ => false,
    };

    /// <summary>
    /// The native twin of <see cref="CopyRequestHeaders(HttpContext, HttpRequestMessage, IReadOnlySet{string})"/>: the client's request headers minus
    /// hop-by-hop fields into a request head, each value its own field; content headers only with a body; Content-Length
    /// is left to the transport (it sends <see cref="ForwarderRequestHead.ContentLength"/>); TE only as "trailers".
    /// </summary>
    public static void CopyRequestHeaders(HttpContext context, ForwarderRequestHead head, IReadOnlySet<string>? allowed = null)
    {
        var headers = context.Request.Headers;
        var listed = ConnectionListed(headers.Connection);
        // NOTE: our server's HeaderDictionary is walked with its struct enumerator (the interface boxes one per request).
        if (headers is HeaderDictionary dictionary)
        {
            foreach (var (name, values) in dictionary)
            {
                CopyRequestField(head, name, values, listed, allowed);
            }
        }
        else
        {
            foreach (var (name, values) in headers)
            {
                CopyRequestField(head, name, values, listed, allowed);
            }
        }

        if (allowed?.Contains("TE") != false && headers.TryGetValue("TE", out var te) && listed?.Contains("TE") != true && ListsTrailers(te))
        {
            head.Headers.Add(new("te", "trailers"));
        }
    }

    /// <summary>
    /// The same copy from a request's field list as the engine decoded it (the direct path): one field per name in the
    /// order names first appear, repeated fields joined as the HttpContext copy joins them, so the backend sees the same
    /// head either way.
    /// </summary>
    /// <remarks>
    /// NOTE: most requests repeat no name, and this runs for every one: a field is compared with the others by name only
    /// when another field shares its bucket (<see cref="NameBuckets"/>). Before, each field scanned all the others twice
    /// (through the list's interface), n² comparisons per request.
    /// </remarks>
    public static void CopyRequestHeaders(IReadOnlyList<KeyValuePair<string, string>> fields, ForwarderRequestHead head, IReadOnlySet<string>? allowed = null)
    {
        var span = AsSpan(fields);
        var listed = ListedByConnection(span);
        var te = JoinedValue(span, "TE");
        var buckets = new NameBuckets(span);

        for (var i = 0; i < span.Length; i++)
        {
            var name = span[i].Key;
            var shared = buckets.IsShared(name);
            if (shared && AppearsBefore(span, i, name))
            {
                continue; // joined into the field of its first occurrence
            }

            CopyRequestField(head, name, shared ? ValuesOf(span, i, name) : new StringValues(span[i].Value), listed, allowed);
        }

        if (allowed?.Contains("TE") != false && te is not null && listed?.Contains("TE") != true && ListsTrailers(te))
        {
            head.Headers.Add(new("te", "trailers"));
        }
    }

    /// <summary>The fields without an interface call per read: our engine's lists are <see cref="List{T}"/>s.</summary>
    private static ReadOnlySpan<KeyValuePair<string, string>> AsSpan(IReadOnlyList<KeyValuePair<string, string>> fields) => fields switch
    {
        List<KeyValuePair<string, string>> list => System.Runtime.InteropServices.CollectionsMarshal.AsSpan(list),
        KeyValuePair<string, string>[] array => array,
        _ => fields.ToArray(),
    };

    /// <summary>
    /// Which of 64 buckets of a cheap case-blind hash of the name (its length, first and last characters) hold more than
    /// one field. Two fields of one name always share a bucket (names are tokens: ASCII, where OrdinalIgnoreCase folds
    /// only letters, and | 0x20 folds them alike); a field alone in its bucket has no namesake.
    /// </summary>
    private readonly ref struct NameBuckets
    {
        private readonly ulong _seen;
        private readonly ulong _shared;

        public NameBuckets(ReadOnlySpan<KeyValuePair<string, string>> fields)
        {
            foreach (var field in fields)
            {
                var bit = 1UL << Bucket(field.Key);
                _shared |= _seen & bit;
                _seen |= bit;
            }
        }

        /// <summary>False: no other field has this name. True: one may (compare the names).</summary>
        public bool IsShared(string name) => (_shared & (1UL << Bucket(name))) != 0;

        private static int Bucket(string name) =>
            name.Length == 0 ? 0 : (name.Length * 7 + (name[0] | 0x20) + ((name[^1] | 0x20) * 3)) & 63;
    }

    /// <summary>The values of <paramref name="name"/> from its first field on (<paramref name="first"/>); a list only when it repeats.</summary>
    private static StringValues ValuesOf(ReadOnlySpan<KeyValuePair<string, string>> fields, int first, string name)
    {
        List<string>? values = null;
        for (var k = first + 1; k < fields.Length; k++)
        {
            if (fields[k].Key.Equals(name, StringComparison.OrdinalIgnoreCase))
            {
                (values ??= [fields[first].Value]).Add(fields[k].Value);
            }
        }

        return values is null ? new StringValues(fields[first].Value) : new StringValues(values.ToArray());
    }

    /// <summary>The values of every field named <paramref name="name"/>, joined with ", " (as HttpClient joins them), or null.</summary>
    public static string? JoinedValue(IReadOnlyList<KeyValuePair<string, string>> fields, string name) => JoinedValue(AsSpan(fields), name);

    private static string? JoinedValue(ReadOnlySpan<KeyValuePair<string, string>> fields, string name)
    {
        string? joined = null;
        for (var i = 0; i < fields.Length; i++)
        {
            if (fields[i].Key.Equals(name, StringComparison.OrdinalIgnoreCase))
            {
                joined = joined is null ? fields[i].Value : joined + ", " + fields[i].Value;
            }
        }

        return joined;
    }

    private static void CopyRequestField(ForwarderRequestHead head, string name, StringValues values, HashSet<string>? listed,
        IReadOnlySet<string>? allowed)
    {
        if (IsHopByHop(name) || listed?.Contains(name) == true || allowed?.Contains(name) == false
            || (IsContentHeader(name) && (!head.HasBody || name.Equals("Content-Length", StringComparison.OrdinalIgnoreCase))))
        {
            return;
        }

        // One field per name, values joined as HttpClient joins them ("a, b"; cookies with "; ", RFC 9113 §8.2.3).
        if (values.Count == 1)
        {
            head.Headers.Add(new(name, values[0] ?? ""));
        }
        else if (values.Count > 1)
        {
            head.Headers.Add(new(name, string.Join(name.Equals("Cookie", StringComparison.OrdinalIgnoreCase) ? "; " : ", ", values.ToArray())));
        }
    }

    private static bool ListsTrailers(StringValues te)
    {
        foreach (var value in te)
        {
            var span = value.AsSpan();
            foreach (var range in span.Split(','))
            {
                if (span[range].Trim().Equals("trailers", StringComparison.OrdinalIgnoreCase))
                {
                    return true;
                }
            }
        }

        return false;
    }

    /// <summary>
    /// Copies a native response's (or trailers') fields to the client, minus hop-by-hop fields and those Connection lists;
    /// with <paramref name="allowed"/>, only the names it holds.
    /// </summary>
    public static void CopyResponseHeaders(IReadOnlyList<KeyValuePair<string, string>> fields, IHeaderDictionary destination,
        IReadOnlySet<string>? allowed = null)
    {
        var span = AsSpan(fields);
        var listed = ListedByConnection(span);
        for (var i = 0; i < span.Length; i++)
        {
            var (name, value) = span[i];
            if (IsHopByHop(name) || listed?.Contains(name) == true || allowed?.Contains(name) == false)
            {
                continue;
            }

            // As the HttpClient path: the backend's field replaces one the pipeline set, and repeats of it add values.
            if (AppearsBefore(span, i, name))
            {
                destination.Append(name, value);
            }
            else
            {
                destination[name] = value;
            }
        }
    }

    /// <summary>
    /// The direct path's copy of a backend response head (or trailers) into the client exchange's field list, which starts
    /// empty: hop-by-hop fields and those Connection lists stay out, the rest keep their order, names lowercased for HTTP/2.
    /// </summary>
    public static void CopyResponseFields(IReadOnlyList<KeyValuePair<string, string>> fields, ICollection<KeyValuePair<string, string>> destination,
        IReadOnlySet<string>? allowed, bool lowercase)
    {
        var span = AsSpan(fields);
        var listed = ListedByConnection(span);
        for (var i = 0; i < span.Length; i++)
        {
            var (name, value) = span[i];
            if (IsHopByHop(name) || listed?.Contains(name) == true || allowed?.Contains(name) == false)
            {
                continue;
            }

            destination.Add(new(lowercase ? name.ToLowerInvariant() : name, value));
        }
    }

    /// <summary>The names every Connection field of <paramref name="fields"/> lists (all of them, not only the first field's), or null.</summary>
    private static HashSet<string>? ListedByConnection(ReadOnlySpan<KeyValuePair<string, string>> fields)
    {
        HashSet<string>? listed = null;
        for (var i = 0; i < fields.Length; i++)
        {
            if (fields[i].Key.Equals("Connection", StringComparison.OrdinalIgnoreCase))
            {
                listed ??= new HashSet<string>(StringComparer.OrdinalIgnoreCase);
                foreach (var token in fields[i].Value.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
                {
                    listed.Add(token);
                }
            }
        }

        return listed;
    }

    private static bool AppearsBefore(ReadOnlySpan<KeyValuePair<string, string>> fields, int index, string name)
    {
        for (var j = 0; j < index; j++)
        {
            if (string.Equals(fields[j].Key, name, StringComparison.OrdinalIgnoreCase))
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>Adds a header to the request or, when it is a content header, to its content (if any).</summary>
    public static void AddRequestHeader(HttpRequestMessage request, string name, StringValues values)
    {
        if (values.Count == 1)
        {
            var value = values.ToString();
            if (!request.Headers.TryAddWithoutValidation(name, value))
            {
                // Content headers only travel with a body: a GET without one sends no Content-Type.
                request.Content?.Headers.TryAddWithoutValidation(name, value);
            }
        }
        else
        {
            IEnumerable<string> all = values!;
            if (!request.Headers.TryAddWithoutValidation(name, all))
            {
                request.Content?.Headers.TryAddWithoutValidation(name, all);
            }
        }
    }

    /// <summary>Copies the backend's response headers (and content headers) to the client response; only the allowed ones when given.</summary>
    public static void CopyResponseHeaders(HttpResponseMessage response, IHeaderDictionary destination, IReadOnlySet<string>? allowed = null)
    {
        var listed = response.Headers.TryGetValues("Connection", out var connection)
            ? ConnectionListed(new StringValues(connection.ToArray()))
            : null;
        Copy(response.Headers, destination, listed, allowed);
        Copy(response.Content.Headers, destination, listed, allowed);
    }

    /// <summary>Copies the backend's trailers to the client's trailers; only the allowed ones when given.</summary>
    public static void CopyTrailers(HttpResponseMessage response, IHeaderDictionary destination, IReadOnlySet<string>? allowed = null) =>
        Copy(response.TrailingHeaders, destination, null, allowed);

    private static void Copy(System.Net.Http.Headers.HttpHeaders source, IHeaderDictionary destination, HashSet<string>? listed,
        IReadOnlySet<string>? allowed)
    {
        foreach (var header in source.NonValidated)
        {
            var name = header.Key;
            if (IsHopByHop(name) || listed?.Contains(name) == true || allowed?.Contains(name) == false)
            {
                continue;
            }

            var values = header.Value;
            destination[name] = values.Count == 1 ? new StringValues(values.ToString()) : new StringValues(values.ToArray());
        }
    }
}
