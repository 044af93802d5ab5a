namespace Proxy.Protocols.Client;

/// <summary>
/// The request head a relay sends to a backend: fields already decoded, validated, stripped of hop-by-hop
/// fields and transformed. The client connection builds the wire form itself (HTTP/2 pseudo-headers and
/// HPACK, or the HTTP/1.1 request line and Host) and never re-parses a string the client sent.
/// </summary>
// Owned by the relay until it is handed to a client connection; read-only after.
public sealed class BackendRequest
{
    /// <summary>A token (RFC 9110 §9): GET, POST...</summary>
    public string Method { get; set; } = "GET";
    /// <summary>"http" or "https": HTTP/2's :scheme (the backend connection's own scheme decides TLS, not this).</summary>
    public string Scheme { get; set; } = "http";
    /// <summary>host[:port] for :authority (HTTP/2) or Host (HTTP/1.1).</summary>
    public string Authority { get; set; } = "";
    /// <summary>Origin-form target: "/path?query". Never empty.</summary>
    public string PathAndQuery { get; set; } = "/";
    /// <summary>
    /// Header fields, no pseudo-headers (the connection lowercases names for HTTP/2 and drops connection-specific fields).
    /// A relay may hand over the list it built (held, not copied). Once the request is started the list is the
    /// connection's: HTTP/2 builds its HEADERS field list in it (pseudo-headers first), and the same request sent again
    /// goes out with that list as it is.
    /// </summary>
    public List<KeyValuePair<string, string>> Headers
    {
        get => _headers ??= new HttpHeaderList();
        init => _headers = value;
    }
    // Made on first read only: a relay hands over its own list, and an initializer would allocate one per request for nothing.
    private List<KeyValuePair<string, string>>? _headers;

    /// <summary>
    /// Where the fields start in <see cref="Headers"/>: after the four pseudo-headers an HTTP/2 connection put in front
    /// (a request it could not take, sent again on HTTP/1.1, skips them), else 0.
    /// </summary>
    internal int FieldsStart => _headers is [{ Key: ":method" }, ..] ? 4 : 0;
    /// <summary>True when a body follows the head (HTTP/2: HEADERS without END_STREAM; HTTP/1.1: content-length or chunked).</summary>
    public bool HasBody { get; set; }
    /// <summary>Declared body length when known (sent as content-length; HTTP/1.1 uses chunked when null and <see cref="HasBody"/>).</summary>
    public long? ContentLength { get; set; }
    /// <summary>
    /// The relay writes and flushes the body right after the exchange starts, from bytes it already holds: HTTP/1.1
    /// then leaves the head in the output for that flush (one write for head and body). Never for a body still
    /// arriving: a relay that waits for the response head before its body could wait on a head we keep.
    /// </summary>
    public bool HeadWaitsForBody { get; set; }
    /// <summary>
    /// The relay's code after it waits for the response head is its own and never blocks (the proxy's direct path): on
    /// a connection whose scheduler runs an event loop, the head's continuation then runs on the thread that read the
    /// head, after its batch of events, instead of waking a thread-pool thread. Leave false when the caller's code (an
    /// app's middleware) may run after the wait.
    /// </summary>
    public bool ContinueOnEventLoop { get; set; }
    /// <summary>
    /// The event loop (Proxy.Transport's epoll thread) serving the client's connection, or -1 when unknown: a pool that
    /// keeps connections per event loop serves the exchange on that loop's connections. Without it, the calling thread's.
    /// </summary>
    public int EventLoop { get; set; } = -1;
}

/// <summary>Why a backend exchange failed; the relay maps it to a 502/504 or a client reset.</summary>
public enum BackendFailure
{
    /// <summary>Connecting (TCP, TLS, preface) failed: nothing was sent.</summary>
    Connect,
    /// <summary>The backend's response (status line, header, framing, HTTP/2 frames) is not valid: 502, never relayed.</summary>
    ProtocolError,
    /// <summary>The backend reset the stream (<see cref="BackendException.ErrorCode"/> holds the RFC 9113 code).</summary>
    StreamReset,
    /// <summary>The backend connection closed or failed mid-exchange.</summary>
    ConnectionLost,
    /// <summary>The backend refused the stream before processing it (REFUSED_STREAM, or beyond its GOAWAY's last stream id): safe to retry elsewhere.</summary>
    Refused,
    /// <summary>Our side abandoned the exchange (<see cref="BackendExchange.Abort"/>).</summary>
    Aborted,
}

/// <summary>A backend exchange failed. Thrown by the response head task and faulted into the body readers/writers.</summary>
public sealed class BackendException(BackendFailure failure, string message, uint errorCode = 0, Exception? inner = null)
    : IOException(message, inner)
{
    public BackendFailure Failure { get; } = failure;
    /// <summary>The RFC 9113 error code for <see cref="BackendFailure.StreamReset"/> (and GOAWAY failures); 0 otherwise.</summary>
    public uint ErrorCode { get; } = errorCode;
}

/// <summary>
/// One request/response exchange with a backend over one of our client connections (HTTP/2 stream or HTTP/1.1
/// request on a kept-alive connection). The relay writes the request body into <see cref="RequestBody"/> and reads
/// the response body from <see cref="ResponseBody"/>; both apply backpressure, and the response side returns
/// flow-control credit (HTTP/2) or reads the socket (HTTP/1.1) only as the relay consumes, so a relayed exchange
/// holds a bounded number of bytes.
/// </summary>
/// <remarks>
/// Threading: one relay flow drives the request side and one the response side (they may be the same). Members of
/// each side are not safe to call concurrently with themselves, as for any PipeReader/PipeWriter.
/// Lifetime: the exchange ends when the response body completed (or faulted) and the request body completed, or after
/// <see cref="Abort"/>; then <see cref="DisposeAsync"/> returns it (and an HTTP/1.1 connection) to its pool.
/// </remarks>
public abstract class BackendExchange : IAsyncDisposable
{
    /// <summary>The request body (only when the request <see cref="BackendRequest.HasBody"/>). FlushAsync waits for backend credit; Complete ends the request.</summary>
    public abstract PipeWriter RequestBody { get; }

    /// <summary>
    /// Waits for the final response head (1xx interim responses are skipped). Throws <see cref="BackendException"/>
    /// when the backend fails first, <see cref="OperationCanceledException"/> when <paramref name="cancellationToken"/> fires
    /// (the exchange is then aborted).
    /// </summary>
    public abstract ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken);

    /// <summary>Status code of the final response (valid after <see cref="ReadResponseHeadAsync"/>).</summary>
    public int StatusCode { get; protected set; }

    /// <summary>Response header fields, names lowercase, without pseudo-headers or connection-specific fields.</summary>
    public HttpHeaderList ResponseHeaders { get; private protected set; } = new();

    /// <summary>
    /// The response body as it arrives: completes at its end, faults with <see cref="BackendException"/> when the
    /// backend resets or the connection fails. Consuming it (AdvanceTo) is what lets the backend send more.
    /// </summary>
    public abstract PipeReader ResponseBody { get; }

    /// <summary>Response trailers (HTTP/2 trailing HEADERS, HTTP/1.1 chunked trailer section); complete once <see cref="ResponseBody"/> completed.</summary>
    public HttpHeaderList ResponseTrailers { get; } = new();

    /// <summary>
    /// Abandons the exchange: HTTP/2 resets the stream with <paramref name="errorCode"/> (CANCEL by default), HTTP/1.1 closes the
    /// connection (it cannot be reused mid-message). Pending reads and writes fail with <see cref="BackendFailure.Aborted"/>. Idempotent.
    /// </summary>
    public abstract void Abort(uint errorCode = 0x8);

    /// <summary>Releases the exchange (after completion or abort). A connection is reused only when the exchange ended cleanly.</summary>
    public abstract ValueTask DisposeAsync();
}
