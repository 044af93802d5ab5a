using System.Buffers;
using System.Diagnostics;
using System.IO.Pipelines;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The client side of one forwarded request, as the forwarder's native path drives it: the request it reads and the
/// response it writes. Two implementations: <see cref="HttpContextFront"/> (the ASP.NET Core pipeline, any server) and
/// the direct path's exchange front (Proxy.Relay: our server's exchange, no HttpContext). The forwarder is generic over
/// it, so each front gets its own compiled copy and no call goes through an interface at run time.
/// </summary>
internal interface IForwardingFront
{
    /// <summary>The route, cluster and destination of the request (the endpoint handler sets them).</summary>
    IReverseProxyFeature? Proxy { get; }

    /// <summary>The HttpContext when there is one (the session affinity and a custom load balancer need it); null on the direct path.</summary>
    HttpContext? HttpContext { get; }

    /// <summary>
    /// True when nothing but our own code runs after the forwarder's waits (the direct path): the transport may resume
    /// it on the event loop that read the backend's response. False under an app's pipeline, whose middleware runs
    /// after the forwarder returns.
    /// </summary>
    bool MayContinueOnEventLoop { get; }

    string Method { get; }

    string? RequestContentType { get; }

    /// <summary>The value of one request header (values joined with ", "), or null.</summary>
    string? RequestHeader(string name);

    /// <summary>How many header fields the request carries (sizes the backend head).</summary>
    int RequestHeaderCount { get; }

    bool HasRequestBody { get; }

    long? RequestContentLength { get; }

    /// <summary>The request body, with the server's and the route's size limits applied.</summary>
    PipeReader RequestBody { get; }

    CancellationToken RequestAborted { get; }

    /// <summary>The request timeouts middleware's token (a route's TimeoutPolicy); none on the direct path.</summary>
    CancellationToken RequestTimeout { get; }

    /// <summary>Why the request must not be forwarded, or null.</summary>
    string? FindMalformation();

    /// <summary>Fills the backend head through <paramref name="transformer"/>; false when it can only build an HttpRequestMessage.</summary>
    bool TryTransformRequest(HttpTransformer transformer, ForwarderRequestHead head, NativeDestination destination);

    /// <summary>Starts the forwarding span, or returns null when nobody listens.</summary>
    Activity? StartActivity();

    /// <summary>Applies the route's body limit (-1: none). False when the declared length is already beyond it.</summary>
    bool ApplyBodyLimit(long limit);

    int StatusCode { get; set; }

    bool HasStarted { get; }

    string? ResponseContentType { get; }

    long? ResponseContentLength { get; }

    /// <summary>Copies the backend's response head (or, with null, what an error response gets) through <paramref name="transformer"/>.</summary>
    void TransformResponse(HttpTransformer transformer, ForwarderBackendCall? call);

    /// <summary>Copies the backend's trailers through <paramref name="transformer"/>, when the client can receive them.</summary>
    void TransformTrailers(HttpTransformer transformer, ForwarderBackendCall call);

    /// <summary>Each write goes out when flushed (no response buffering by the host).</summary>
    void DisableBuffering();

    /// <summary>Commits status and headers.</summary>
    ValueTask StartResponseAsync(CancellationToken cancellationToken);

    PipeWriter ResponseBody { get; }

    /// <summary>
    /// The size of the pieces the response pump copies a bulk body in: the largest write hint one pooled block of
    /// <see cref="ResponseBody"/> serves.
    /// </summary>
    int ResponseBodyBlockSize { get; }

    /// <summary>
    /// True when the response pump may lend the backend's bytes to the client's connection (<see cref="LendResponseBodyAsync"/>)
    /// instead of copying them into <see cref="ResponseBody"/>: our server's HTTP/2 streams on the direct path.
    /// </summary>
    bool CanLendResponseBody { get; }

    /// <summary>
    /// Sends <paramref name="body"/> from the caller's memory (the backend's buffer): true once every byte is in the
    /// client connection's output, false when the client's stream stopped first. The memory is not read after the task
    /// completes; the caller keeps it valid until then.
    /// </summary>
    ValueTask<bool> LendResponseBodyAsync(ReadOnlySequence<byte> body);

    /// <summary>Gives up a pending lend: its task completes (false) once the client's connection let go of the bytes.</summary>
    void RevokeLentResponseBody();

    /// <summary>Drops what the response head holds so far: the forwarder answers with an error instead.</summary>
    void ClearResponse();

    /// <summary>A gRPC status in the only HEADERS frame (HTTP 200, application/grpc, grpc-status, grpc-message).</summary>
    void SetGrpcTrailersOnly(int status, string message);

    /// <summary>Answers with <paramref name="status"/> and a plain-text body (a refusal's reason).</summary>
    ValueTask WriteTextResponseAsync(int status, string text, CancellationToken cancellationToken);

    /// <summary>Records the outcome where the host looks for it (IForwarderErrorFeature; the direct path keeps it itself).</summary>
    void RecordError(ForwarderError error, Exception? exception, bool clientDeadlineExpired);

    /// <summary>Whether the last recorded error was the client's own expired gRPC deadline.</summary>
    bool ClientDeadlineExpired { get; }

    /// <summary>Breaks the client's stream (RST_STREAM with <paramref name="http2Code"/>, or the HTTP/1.1 connection); returns what it did, for the log.</summary>
    string Reset(int http2Code);

    /// <summary>
    /// True when the front ends its own response once forwarding is over (the direct path: no server code runs after the
    /// endpoint handler), in <see cref="EndAsync"/>; false on the pipeline, where the server completes the response after
    /// the endpoint and an exception goes to the app's middleware.
    /// </summary>
    bool EndsResponse { get; }

    /// <summary>
    /// Forwarding is over (<see cref="EndsResponse"/> only): completes the response, or, after <paramref name="failure"/>,
    /// answers it as our server answers an app that threw (400 or 500, empty) or breaks the stream when the head went out.
    /// Never throws.
    /// </summary>
    ValueTask EndAsync(Exception? failure);
}

/// <summary>The ASP.NET Core front: an HttpContext on any server (Kestrel, ours).</summary>
// Owned by one request's pipeline; a struct, so the forwarder's generic copy for it allocates nothing.
internal readonly struct HttpContextFront(HttpContext context) : IForwardingFront
{
    public HttpContext Context { get; } = context;

    public IReverseProxyFeature? Proxy => Context.Features.Get<IReverseProxyFeature>();

    HttpContext? IForwardingFront.HttpContext => Context;

    public bool MayContinueOnEventLoop => false;

    public string Method => Context.Request.Method;

    public string? RequestContentType => Context.Request.ContentType;

    public string? RequestHeader(string name)
    {
        var values = Context.Request.Headers[name];
        return values.Count == 0 ? null : values.Count == 1 ? values[0] : values.ToString();
    }

    public int RequestHeaderCount => Context.Request.Headers.Count;

    public bool HasRequestBody
    {
        get
        {
            if (Context.Features.Get<IHttpRequestBodyDetectionFeature>() is { } detection)
            {
                return detection.CanHaveBody;
            }

            return Context.Request.ContentLength > 0 || Context.Request.Headers.ContainsKey("Transfer-Encoding");
        }
    }

    public long? RequestContentLength => Context.Request.ContentLength;

    public PipeReader RequestBody => Context.Request.BodyReader;

    public CancellationToken RequestAborted => Context.RequestAborted;

    public CancellationToken RequestTimeout => ForwardingCancellation.RequestTimeoutOf(Context);

    public string? FindMalformation() => RequestValidator.FindMalformation(Context);

    public bool TryTransformRequest(HttpTransformer transformer, ForwarderRequestHead head, NativeDestination destination) =>
        transformer.TryTransformRequestNative(Context, head, destination);

    public Activity? StartActivity() => Telemetry.ForwardingTracing.Start(Context, Proxy);

    /// <summary>
    /// Sets the route's MaxRequestBodySize on the server's per-request limit (-1 = none). False when the request declares a
    /// longer body: it is refused before a destination is chosen, so no backend sees any of it.
    /// </summary>
    public bool ApplyBodyLimit(long limit)
    {
        // Read-only once something read the body; the server's own limit then already applied.
        if (Context.Features.Get<IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } size)
        {
            size.MaxRequestBodySize = limit < 0 ? null : limit;
        }

        return limit < 0 || !(Context.Request.ContentLength > limit);
    }

    public int StatusCode
    {
        get => Context.Response.StatusCode;
        set => Context.Response.StatusCode = value;
    }

    public bool HasStarted => Context.Response.HasStarted;

    public string? ResponseContentType => Context.Response.ContentType;

    public long? ResponseContentLength => Context.Response.ContentLength;

    public void TransformResponse(HttpTransformer transformer, ForwarderBackendCall? call) => transformer.TransformResponseNative(Context, call);

    public void TransformTrailers(HttpTransformer transformer, ForwarderBackendCall call) => transformer.TransformResponseTrailersNative(Context, call);

    public void DisableBuffering() => Context.Features.Get<IHttpResponseBodyFeature>()?.DisableBuffering();

    public ValueTask StartResponseAsync(CancellationToken cancellationToken) => new(Context.Response.StartAsync(cancellationToken));

    public PipeWriter ResponseBody => Context.Response.BodyWriter;

    // NOTE: 4 KiB whichever server runs: Kestrel's response pipes rent 4 KiB blocks and take anything larger from
    // ArrayPool.Shared, and a body writer does not say whose pool is behind it.
    public int ResponseBodyBlockSize => 4096;

    public bool CanLendResponseBody => false;

    public ValueTask<bool> LendResponseBodyAsync(ReadOnlySequence<byte> body) => throw new NotSupportedException("The pipeline's response body takes writes only.");

    public void RevokeLentResponseBody()
    {
    }

    public void ClearResponse() => Context.Response.Clear();

    public void SetGrpcTrailersOnly(int status, string message) => GrpcProtocol.SetTrailersOnlyResponse(Context.Response, status, message);

    public async ValueTask WriteTextResponseAsync(int status, string text, CancellationToken cancellationToken)
    {
        var response = Context.Response;
        response.StatusCode = status;
        response.ContentType = "text/plain; charset=utf-8";
        await response.WriteAsync(text, cancellationToken).ConfigureAwait(false);
    }

    public void RecordError(ForwarderError error, Exception? exception, bool clientDeadlineExpired) =>
        Context.Features.Set<IForwarderErrorFeature>(new ForwarderErrorFeature(error, exception) { ClientDeadlineExpired = clientDeadlineExpired });

    public bool ClientDeadlineExpired => Context.Features.Get<IForwarderErrorFeature>() is ForwarderErrorFeature { ClientDeadlineExpired: true };

    public string Reset(int http2Code)
    {
        if (Context.Features.Get<IHttpResetFeature>() is { } reset)
        {
            reset.Reset(http2Code);
            return http2Code == 0x8 ? "RST_STREAM(CANCEL)" : "RST_STREAM(INTERNAL_ERROR)";
        }

        Context.Abort();
        return "connection abort";
    }

    public bool EndsResponse => false;

    public ValueTask EndAsync(Exception? failure) => ValueTask.CompletedTask;
}
