using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Http1;

/// <summary>
/// One HTTP/1.x request/response on a connection. The request side is filled by the parser (this
/// class is its sink) before the handler runs; the response side (Http1Exchange.Response.cs) is
/// driven by the app and writes straight to the transport.
///
/// Requests on a connection never overlap, so the connection keeps one exchange and <see cref="Reset"/>s
/// it between them (its header lists keep their capacity; the strings of the request this thread parsed last are
/// reused when the next one repeats the same octets, see OnField). As with Kestrel, an
/// app must not use the exchange, its token or its body objects after its handler has returned.
/// </summary>
// Owned by the connection loop until HandleAsync starts, then by the app; RequestAborted may fire from any thread.
internal sealed partial class Http1Exchange : HttpExchange, IHttp1RequestSink
{
    private readonly Http1Connection _connection;
    private readonly TrailerSink _trailerSink;
    private CancellationTokenSource _abortedCts = new();
    private Http1RequestBody? _body;
    private Http1EmptyRequestBody? _emptyBody;
    private bool _authorityFromTarget;

    // The fields and target of the request heads this thread parsed last, by position (see OnField); a head takes the
    // thread's slots when its request line comes.
    private const int RecentFieldCount = 16;
    [ThreadStatic] private static KeyValuePair<string, string>[]? t_recentFields;
    [ThreadStatic] private static string? t_recentTarget;
    private KeyValuePair<string, string>[] _recentFields = [];

    public Http1Exchange(Http1Connection connection)
    {
        _connection = connection;
        _trailerSink = new TrailerSink(this);
        _responseBody = new Http1ResponseBody(this);
    }

    public Http1RequestHead Head { get; private set; }

    /// <summary>The body reader and its pump; null when the request has no body.</summary>
    public Http1RequestBody? Body => _body;

    public override PipeReader RequestBody => _body ?? (PipeReader)(_emptyBody ??= new Http1EmptyRequestBody());

    public override CancellationToken RequestAborted => _abortedCts.Token;

    /// <summary>Readies the exchange for the connection's next request; the previous one has fully ended.</summary>
    public void Reset()
    {
        RequestHeaders.Clear();
        RequestTrailers.Clear();
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        Authority = "";
        RequestContentLength = null;
        RequestHasBody = false;
        StatusCode = 200;
        ReasonPhrase = null;
        Head = default;
        _authorityFromTarget = false;
        _body = null;
        _emptyBody?.Reset();
        ResetResponse();
        if (!_abortedCts.TryReset())
        {
            // Cancelled (the connection is closing anyway): a fresh one. NOTE: the old one is not disposed, its
            // callbacks may still be queued on the thread pool (RequestAbortSignal) and Dispose would drop them.
            _abortedCts = new CancellationTokenSource();
        }
    }

    /// <summary>Called by the connection once the parser has accepted the head.</summary>
    public void OnHeadParsed(in Http1RequestHead head)
    {
        Head = head;
        Protocol = head.Version == Http1Version.Http11 ? "HTTP/1.1" : "HTTP/1.0";
        Scheme = Connection.Scheme;
        RequestContentLength = head.ContentLength >= 0 ? head.ContentLength : null;
        RequestHasBody = head.Framing != Http1BodyFraming.None;
        // No pipe, no pump for a request without a body: the app reads an empty, completed body.
        _body = RequestHasBody ? new Http1RequestBody(_connection, this, head, _trailerSink) : null;
    }

    void IHttp1RequestSink.OnRequestLine(ReadOnlySpan<byte> method, ReadOnlySpan<byte> target, Http1Version version, Http1TargetForm form)
    {
        _recentFields = t_recentFields ??= new KeyValuePair<string, string>[RecentFieldCount];
        Method = KnownMethod(method) ?? Encoding.ASCII.GetString(method);
        switch (form)
        {
            case Http1TargetForm.Absolute:
                Http1RequestTarget.SplitAbsolute(target, out var authority, out var pathAndQuery);
                Authority = Encoding.ASCII.GetString(authority);
                _authorityFromTarget = true;
                RawTarget = pathAndQuery.IsEmpty || pathAndQuery[0] != (byte)'/'
                    ? "/" + Encoding.ASCII.GetString(pathAndQuery)
                    : Encoding.ASCII.GetString(pathAndQuery);
                break;
            case Http1TargetForm.Authority:
                Authority = Encoding.ASCII.GetString(target);
                _authorityFromTarget = true;
                RawTarget = Authority;
                break;
            default:
                if (t_recentTarget is { } recent && KnownHeaderStrings.EqualsLatin1(recent, target))
                {
                    RawTarget = recent;
                }
                else
                {
                    RawTarget = t_recentTarget = Encoding.ASCII.GetString(target);
                }
                break;
        }
    }

    /// <remarks>
    /// NOTE: a client sends the same fields in the same order request after request, so the field this thread saw last
    /// at this position is checked first, and its name and value strings are reused when the octets are the same. The
    /// fields are the thread's, not the connection's: with 64 client connections the same connection's previous request
    /// was 64 requests ago and its strings were cold in the cache; the thread's last head was parsed a moment ago. The
    /// parser runs once the whole head is in, so one head's fields come on one thread; every string a slot yields is
    /// compared in full before it is used all the same.
    /// </remarks>
    void IHttp1FieldSink.OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        var position = RequestHeaders.Count;
        var recent = _recentFields;
        string nameString, valueString;
        if ((uint)position < (uint)recent.Length
            && recent[position] is var previous
            && previous.Key is { } previousName
            && KnownHeaderStrings.EqualsLatin1(previousName, name))
        {
            nameString = previousName;
            if (previous.Value is { } previousValue && KnownHeaderStrings.EqualsLatin1(previousValue, value))
            {
                valueString = previousValue;
            }
            else
            {
                valueString = Encoding.Latin1.GetString(value);
                recent[position] = new(nameString, valueString);
            }
        }
        else
        {
            nameString = Encoding.ASCII.GetString(name);
            // obs-text is carried as Latin-1, so every byte round-trips.
            valueString = Encoding.Latin1.GetString(value);
            if ((uint)position < (uint)recent.Length)
            {
                recent[position] = new(nameString, valueString);
            }
        }
        RequestHeaders.Add(nameString, valueString);
        // RFC 9112 §3.2.2: with an absolute-form target the Host header is ignored.
        if (!_authorityFromTarget && string.Equals(nameString, "Host", StringComparison.OrdinalIgnoreCase))
        {
            Authority = valueString;
        }
    }

    private static string? KnownMethod(ReadOnlySpan<byte> method) => method.Length switch
    {
        3 when method.SequenceEqual("GET"u8) => "GET",
        3 when method.SequenceEqual("PUT"u8) => "PUT",
        4 when method.SequenceEqual("POST"u8) => "POST",
        4 when method.SequenceEqual("HEAD"u8) => "HEAD",
        5 when method.SequenceEqual("PATCH"u8) => "PATCH",
        6 when method.SequenceEqual("DELETE"u8) => "DELETE",
        7 when method.SequenceEqual("OPTIONS"u8) => "OPTIONS",
        7 when method.SequenceEqual("CONNECT"u8) => "CONNECT",
        _ => null,
    };

    /// <summary>The client closed the connection (or the transport failed): fire RequestAborted.</summary>
    public void OnClientDisconnected()
    {
        _connection.MarkClientGone();
        CancelAborted();
    }

    public override void Abort(uint errorCode)
    {
        // HTTP/1.1 has no per-request reset: aborting the exchange closes the connection.
        _connection.Abort();
        CancelAborted();
    }

    /// <summary>
    /// Cancels RequestAborted now; the app's callbacks on it run on the thread pool (<see cref="RequestAbortSignal"/>),
    /// never on the body pump or the connection loop. Callers fire it before they fail the request body.
    /// </summary>
    internal void CancelAborted() => RequestAbortSignal.Fire(_abortedCts);

    // Owned by the body pump: adds chunked trailers to RequestTrailers.
    private sealed class TrailerSink(Http1Exchange exchange) : IHttp1FieldSink
    {
        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) =>
            exchange.RequestTrailers.Add(Encoding.ASCII.GetString(name), Encoding.Latin1.GetString(value));
    }
}
