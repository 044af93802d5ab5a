using System.IO.Pipelines;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The request head the forwarder hands to a native transport: already validated, hop-by-hop fields stripped and the
/// route's transforms applied. The transport builds the wire form (HTTP/2 pseudo-headers and HPACK, or the HTTP/1.1
/// request line and Host) from these fields and nothing else.
/// </summary>
// Owned by one forwarded request.
public sealed class ForwarderRequestHead
{
    public ForwarderRequestHead()
    {
        Headers = new();
    }

    /// <summary>A head whose field list starts with room for <paramref name="fieldCapacity"/> fields (no regrowth as transforms add theirs).</summary>
    public ForwarderRequestHead(int fieldCapacity)
    {
        Headers = new(fieldCapacity);
    }

    /// <summary>The method token.</summary>
    public string Method { get; set; } = "GET";

    /// <summary>host[:port]: :authority (HTTP/2) or Host (HTTP/1.1). The destination's by default; a transform may keep the client's.</summary>
    public string Authority { get; set; } = "";

    /// <summary>Origin-form target, "/path?query".</summary>
    public string PathAndQuery { get; set; } = "/";

    /// <summary>
    /// Header fields in order (names as the client sent them; the transport lowercases for HTTP/2). A transport may hold
    /// this list for the exchange rather than copy it: it is not changed once the head is handed to the transport.
    /// </summary>
    public List<KeyValuePair<string, string>> Headers { get; }

    /// <summary>True when a request body follows.</summary>
    public bool HasBody { get; set; }

    /// <summary>The declared body length, when known.</summary>
    public long? ContentLength { get; set; }

    /// <summary>
    /// The whole body is already here and the forwarder writes and flushes it as soon as the call starts: a transport
    /// may keep the head for that flush, so head and body leave in one write.
    /// </summary>
    public bool BodyFollowsAtOnce { get; set; }

    /// <summary>
    /// Only the forwarder's own code runs after it waits for the response (the direct path, no app middleware around
    /// it): a transport may resume it on the event loop that read the response instead of waking a thread-pool thread.
    /// </summary>
    public bool ContinueOnEventLoop { get; set; }

    /// <summary>
    /// The client's request on the ASP.NET Core pipeline (null on the direct path): a transport may read the server's
    /// features from it, such as which event loop serves the client's connection, to keep the backend exchange there.
    /// </summary>
    public Microsoft.AspNetCore.Http.HttpContext? HttpContext { get; set; }
}

/// <summary>Why a native backend exchange failed.</summary>
public enum ForwarderTransportFailure
{
    /// <summary>Connecting (TCP, TLS, HTTP/2 preface) failed: nothing was sent.</summary>
    Connect,
    /// <summary>The backend's response broke the protocol (never relayed).</summary>
    ProtocolError,
    /// <summary>The backend reset the stream.</summary>
    StreamReset,
    /// <summary>The backend connection failed or closed mid-exchange.</summary>
    ConnectionLost,
    /// <summary>The backend refused the request before processing it (REFUSED_STREAM, GOAWAY): safe to retry.</summary>
    Refused,
    /// <summary>We abandoned the exchange.</summary>
    Aborted,
}

/// <summary>A native backend exchange failed; <see cref="ErrorCode"/> carries the HTTP/2 code of a reset.</summary>
public sealed class ForwarderTransportException(ForwarderTransportFailure failure, string message, uint errorCode = 0, Exception? inner = null)
    : IOException(message, inner)
{
    /// <summary>What failed.</summary>
    public ForwarderTransportFailure Failure { get; } = failure;

    /// <summary>The RFC 9113 error code of a reset or GOAWAY; 0 otherwise.</summary>
    public uint ErrorCode { get; } = errorCode;
}

/// <summary>
/// One backend exchange of a native transport, as the forwarder drives it: the request body goes into
/// <see cref="RequestBody"/>, the response comes out of <see cref="ResponseBody"/>. Both apply backpressure, and the
/// response side gives the backend credit only as the forwarder consumes, so a relayed exchange holds a bounded number
/// of bytes. Failures surface as <see cref="ForwarderTransportException"/>.
/// </summary>
public abstract class ForwarderBackendCall : IAsyncDisposable
{
    /// <summary>Where the request body goes (when the head said it has one). Complete it to end the request.</summary>
    public abstract PipeWriter RequestBody { get; }

    /// <summary>Waits for the final response head.</summary>
    public abstract ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken);

    /// <summary>The response status code (after <see cref="ReadResponseHeadAsync"/>).</summary>
    public abstract int StatusCode { get; }

    /// <summary>Response header fields, hop-by-hop fields removed.</summary>
    public abstract IReadOnlyList<KeyValuePair<string, string>> ResponseHeaders { get; }

    /// <summary>The response body as it arrives; completes at its end.</summary>
    public abstract PipeReader ResponseBody { get; }

    /// <summary>Response trailers, complete once <see cref="ResponseBody"/> completed.</summary>
    public abstract IReadOnlyList<KeyValuePair<string, string>> ResponseTrailers { get; }

    /// <summary>Abandons the exchange (HTTP/2: RST_STREAM with <paramref name="errorCode"/>; HTTP/1.1: the connection closes).</summary>
    public abstract void Abort(uint errorCode = 0x8);

    /// <summary>Releases the exchange (and returns its connection to the pool when it ended cleanly).</summary>
    public abstract ValueTask DisposeAsync();

    /// <summary>
    /// The client's response behind the request's HttpContext, when the transport knows it (the relay on our server,
    /// while no middleware replaced the response body); null otherwise. The response pump then writes in its blocks and
    /// may lend to it, as on the direct path.
    /// </summary>
    internal virtual IClientResponseSink? ClientResponse => null;
}

/// <summary>
/// The client's response as a native transport sees it past the HttpContext (our server's exchange): the largest block
/// its body pipe serves, and lending (the backend's bytes framed from the backend's buffer, see
/// <c>IForwardingFront.LendResponseBodyAsync</c>).
/// </summary>
internal interface IClientResponseSink
{
    /// <summary>The largest write hint one pooled block of the client's response body serves.</summary>
    int BlockSize { get; }

    /// <summary>True when <see cref="LendAsync"/> works (an HTTP/2 stream of our server).</summary>
    bool CanLend { get; }

    /// <summary>Sends <paramref name="body"/> from the caller's memory; the response must have started. As <c>IForwardingFront.LendResponseBodyAsync</c>.</summary>
    ValueTask<bool> LendAsync(System.Buffers.ReadOnlySequence<byte> body);

    /// <summary>Gives up a pending lend, as <c>IForwardingFront.RevokeLentResponseBody</c>.</summary>
    void Revoke();
}

/// <summary>A cluster's native backend transport: its connection pools, one per destination.</summary>
public interface IForwarderClusterTransport : IDisposable
{
    /// <summary>
    /// Starts an exchange with the destination at <paramref name="destinationPrefix"/> (<paramref name="destinationId"/> in
    /// the cluster's config, for metrics): takes (or opens) a pooled connection and sends the head. Throws
    /// <see cref="ForwarderTransportException"/> when it cannot.
    /// </summary>
    ValueTask<ForwarderBackendCall> StartAsync(string? destinationId, string destinationPrefix, ForwarderRequestHead head, CancellationToken cancellationToken);

    /// <summary>
    /// How many fields the transport adds to <see cref="ForwarderRequestHead.Headers"/> in place once it has the head
    /// (an HTTP/2 connection puts its pseudo-headers there): the forwarder makes the list that much larger up front.
    /// </summary>
    int FieldsAddedToHead => 0;
}

/// <summary>
/// A backend transport other than HttpClient, plugged in through DI (the native relay of Proxy.Server registers one).
/// Clusters use it when their <see cref="ClusterConfig.Transport"/> says <c>Native</c>, or by default when
/// <see cref="IsDefault"/> is true.
/// </summary>
public interface IForwarderTransport
{
    /// <summary>True when clusters that name no transport use this one (the native relay: when the app runs on Proxy.Server).</summary>
    bool IsDefault { get; }

    /// <summary>Creates the transport of one cluster (pools, TLS settings, versions from its config).</summary>
    IForwarderClusterTransport CreateCluster(ClusterConfig cluster);
}

/// <summary>The transports a cluster can use (<see cref="ClusterConfig.Transport"/>).</summary>
public static class ForwarderTransports
{
    /// <summary>Our own HTTP/2 and HTTP/1.1 client connections (needs a registered <see cref="IForwarderTransport"/>).</summary>
    public const string Native = nameof(Native);

    /// <summary>SocketsHttpHandler.</summary>
    public const string HttpClient = nameof(HttpClient);
}
