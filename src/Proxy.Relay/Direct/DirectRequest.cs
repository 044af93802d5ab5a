using System.Buffers;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Text;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Transforms;
using Proxy.Protocols;
using Proxy.Server.Features;
using Proxy.Server.Internal;

namespace Proxy.Relay.Direct;

/// <summary>
/// One request on the direct path: the server's exchange, the route it goes to, and what the forwarder records about it.
/// It is what transforms read (<see cref="TransformSource"/>); <see cref="ExchangeFront"/> presents it to the forwarder.
/// </summary>
// Owned by the request's direct-path flow (one logical thread of control, as the exchange's app would be).
internal sealed class DirectRequest(HttpExchange exchange, ReverseProxyFeature feature, string path, string query, long? maxRequestBodySize,
    DateHeaderCache dateCache, bool addServerHeader, ILogger logger) : TransformSource
{
    private RequestBodyReader? _body;
    private PipeReader? _countedBody;
    private PipeWriter? _countedResponse;
    private long? _maxRequestBodySize = maxRequestBodySize;

    /// <summary>
    /// Set when something listens to the server's request metric: <see cref="EndAsync"/> records the request there once its
    /// response completed or broke, with <see cref="HttpRoute"/> and the time since <see cref="Started"/>.
    /// </summary>
    public ServerRequestDuration? Duration { get; set; }

    /// <summary>The route's template, the metric's <c>http.route</c>.</summary>
    public string? HttpRoute { get; set; }

    /// <summary>When the direct path took the request (a <see cref="Stopwatch"/> timestamp), for <see cref="Duration"/>.</summary>
    public long Started { get; set; }

    /// <summary>Set when an observer wants the body byte counts: the bodies are then read and written through counting pipes.</summary>
    public Forwarding.Telemetry.BodyByteCounts? Counts { get; set; }

    /// <summary>The response body, counted when <see cref="Counts"/> is set.</summary>
    public PipeWriter ResponseBody => Counts is null ? Exchange.ResponseBody : _countedResponse ??= new Forwarding.Telemetry.CountingPipeWriter(Exchange.ResponseBody, Counts);

    public HttpExchange Exchange { get; } = exchange;

    public ReverseProxyFeature Feature { get; } = feature;

    public bool IsHttp2 { get; } = exchange.Protocol == "HTTP/2";

    public ForwarderError Error { get; private set; }

    public bool ClientDeadlineExpired { get; private set; }

    public override string Method => Exchange.Method;

    public override PathString Path { get; } = new(path);

    public override QueryString QueryString { get; } = new(query);

    public override string Scheme => Exchange.Scheme;

    /// <summary>
    /// The host the request is served for, as ASP.NET Core's Request.Host: the Host field for HTTP/1.1 (an absolute-form
    /// target's authority only when there is none), :authority for HTTP/2 (our server puts it in place of Host).
    /// </summary>
    public override HostString Host { get; } = new(exchange.Protocol != "HTTP/2" && exchange.RequestHeaders.Get("host") is { } host ? host : exchange.Authority);

    public override IPAddress? RemoteIpAddress => (Exchange.Connection.RemoteEndPoint as IPEndPoint)?.Address;

    public override string? RemoteIpText => Exchange.Connection.RemoteIpText;

    public override IPAddress? LocalIpAddress => (Exchange.Connection.LocalEndPoint as IPEndPoint)?.Address;

    public override IReadOnlyList<KeyValuePair<string, string>> Fields => Exchange.RequestHeaders;

    /// <summary>The body through the server's reader: its size limit (the server's, or the route's) answers 413 as on the pipeline.</summary>
    public PipeReader RequestBody
    {
        get
        {
            if (!Exchange.RequestHasBody)
            {
                return Exchange.RequestBody;
            }

            if (_body is null)
            {
                _body = new RequestBodyReader(Exchange);
                _body.Reset(_maxRequestBodySize);
            }

            return Counts is null ? _body : _countedBody ??= new Forwarding.Telemetry.CountingPipeReader(_body, Counts);
        }
    }

    public bool ApplyBodyLimit(long limit)
    {
        if (_body is not { HasStartedReading: true })
        {
            _maxRequestBodySize = limit < 0 ? null : limit;
            _body?.Reset(_maxRequestBodySize);
        }

        return limit < 0 || !(Exchange.RequestContentLength > limit);
    }

    public void RecordError(ForwarderError error, bool clientDeadlineExpired)
    {
        Error = error;
        ClientDeadlineExpired = clientDeadlineExpired;
    }

    /// <summary>What the server adds to every response it sends for the app: Date, and Server unless turned off.</summary>
    public void AddServerFields()
    {
        var headers = Exchange.ResponseHeaders;
        if (headers.Get("date") is null)
        {
            headers.Add(IsHttp2 ? "date" : "Date", dateCache.GetValue());
        }

        if (addServerHeader && headers.Get("server") is null)
        {
            headers.Add(IsHttp2 ? "server" : "Server", "proxy");
        }
    }

    public long? ResponseContentLength =>
        Exchange.ResponseHeaders.Get("content-length") is { } text && long.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var length)
            ? length
            : null;

    public string? RequestHeader(string name) => HeaderRules.JoinedValue(Exchange.RequestHeaders, name);

    public async ValueTask WriteTextResponseAsync(int status, string text, CancellationToken cancellationToken)
    {
        var bytes = Encoding.UTF8.GetBytes(text);
        Exchange.StatusCode = status;
        Exchange.ResponseHeaders.Add(IsHttp2 ? "content-type" : "Content-Type", "text/plain; charset=utf-8");
        Exchange.ResponseHeaders.Add(IsHttp2 ? "content-length" : "Content-Length", bytes.Length.ToString(CultureInfo.InvariantCulture));
        AddServerFields();
        await ResponseBody.WriteAsync(bytes, cancellationToken).ConfigureAwait(false);
    }

    public void SetGrpcTrailersOnly(int status, string message)
    {
        Exchange.StatusCode = StatusCodes.Status200OK;
        var headers = Exchange.ResponseHeaders;
        headers.Add(IsHttp2 ? "content-type" : "Content-Type", "application/grpc");
        headers.Add("grpc-status", status.ToString(CultureInfo.InvariantCulture));
        headers.Add("grpc-message", Uri.EscapeDataString(message));
        AddServerFields();
    }

    public void ClearResponse()
    {
        Exchange.StatusCode = StatusCodes.Status200OK;
        Exchange.ReasonPhrase = null;
        Exchange.ResponseHeaders.Clear();
        Exchange.ResponseTrailers.Clear();
    }

    /// <summary>
    /// Forwarding is over: completes the exchange. After <paramref name="failure"/> it does what our server does when the app
    /// throws (RequestFeatures.OnApplicationErrorAsync): the status of a bad request, else 500, with an empty body, when
    /// nothing was sent yet; else the stream is broken. Then records the request in the server's metric when
    /// <see cref="Duration"/> is set. Never throws.
    /// </summary>
    public ValueTask EndAsync(Exception? failure) => Duration is null ? EndCoreAsync(failure) : EndAndRecordAsync(failure);

    // NOTE: the metric is recorded here rather than in a frame around the handler's task: with the standalone proxy's
    // metrics on (its default), that frame was a state-machine box and one more continuation per request.
    private async ValueTask EndAndRecordAsync(Exception? failure)
    {
        try
        {
            await EndCoreAsync(failure).ConfigureAwait(false);
        }
        finally
        {
            Duration!.Record(Exchange, HttpRoute, Stopwatch.GetElapsedTime(Started));
        }
    }

    private async ValueTask EndCoreAsync(Exception? failure)
    {
        var exchange = Exchange;
        if (failure is not null)
        {
            if (exchange.RequestAborted.IsCancellationRequested && failure is OperationCanceledException or IOException)
            {
                DirectLog.StoppedByClient(logger, Feature.RouteId, failure.GetType().Name);
            }
            else
            {
                DirectLog.Failed(logger, Feature.RouteId, failure);
            }

            if (exchange.HasResponseStarted)
            {
                exchange.Abort(0x2);
                return;
            }

            ClearResponse();
            exchange.StatusCode = failure is BadHttpRequestException bad ? bad.StatusCode : 500;
            exchange.ResponseHeaders.Add(IsHttp2 ? "content-length" : "Content-Length", "0");
        }

        try
        {
            if (!exchange.HasResponseStarted)
            {
                AddServerFields();
            }

            await exchange.CompleteAsync().ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            // Completing failed (the client is gone, the engine refused a field): nothing more can be sent.
            DirectLog.CompletionFailed(logger, Feature.RouteId, ex.GetType().Name, ex.Message);
            exchange.Abort(0x2);
        }
    }
}

/// <summary>The forwarder's view of a <see cref="DirectRequest"/>: the exchange, no HttpContext.</summary>
// A struct, so the forwarder's generic copy for it is compiled for it alone (no interface dispatch).
internal readonly struct ExchangeFront(DirectRequest request) : IForwardingFront
{
    private HttpExchange Exchange => request.Exchange;

    public IReverseProxyFeature? Proxy => request.Feature;

    public HttpContext? HttpContext => null;

    public bool MayContinueOnEventLoop => true;

    public string Method => Exchange.Method;

    public string? RequestContentType => Exchange.RequestHeaders.Get("content-type");

    public string? RequestHeader(string name) => request.RequestHeader(name);

    public int RequestHeaderCount => Exchange.RequestHeaders.Count;

    public bool HasRequestBody => Exchange.RequestHasBody;

    public long? RequestContentLength => Exchange.RequestContentLength;

    public PipeReader RequestBody => request.RequestBody;

    public CancellationToken RequestAborted => Exchange.RequestAborted;

    public CancellationToken RequestTimeout => default;

    public string? FindMalformation() =>
        RequestValidator.FindMalformation(Exchange.Method, Exchange.RawTarget, Exchange.Scheme, request.IsHttp2, request.Host.Value ?? "", Exchange.RequestHeaders);

    public bool TryTransformRequest(HttpTransformer transformer, ForwarderRequestHead head, NativeDestination destination)
    {
        transformer.TransformRequestDirect(request, head, destination, request.Feature.DestinationHost);
        return true;
    }

    public Activity? StartActivity() => Forwarding.Telemetry.ForwardingTracing.Start(Exchange.Method, Exchange.RequestHeaders, request.Feature);

    public bool ApplyBodyLimit(long limit) => request.ApplyBodyLimit(limit);

    public int StatusCode
    {
        get => Exchange.StatusCode;
        set => Exchange.StatusCode = value;
    }

    public bool HasStarted => Exchange.HasResponseStarted;

    public string? ResponseContentType => Exchange.ResponseHeaders.Get("content-type");

    public long? ResponseContentLength => request.ResponseContentLength;

    public void TransformResponse(HttpTransformer transformer, ForwarderBackendCall? call)
    {
        if (call is not null)
        {
            transformer.TransformResponseDirect(call, Exchange.ResponseHeaders, lowercase: request.IsHttp2);
        }

        request.AddServerFields();
    }

    public void TransformTrailers(HttpTransformer transformer, ForwarderBackendCall call)
    {
        if (call.ResponseTrailers.Count > 0 && Exchange.SupportsTrailers)
        {
            transformer.TransformTrailersDirect(call, Exchange.ResponseTrailers, lowercase: request.IsHttp2);
        }
    }

    public void DisableBuffering()
    {
        // The exchange never buffers a response: each flush goes to the connection's writer.
    }

    public ValueTask StartResponseAsync(CancellationToken cancellationToken) => Exchange.StartResponseAsync(cancellationToken);

    public PipeWriter ResponseBody => request.ResponseBody;

    public int ResponseBodyBlockSize => request.Exchange.ResponseBodyBlockSize;

    public bool CanLendResponseBody => request.Exchange.CanLendResponseBody;

    public ValueTask<bool> LendResponseBodyAsync(ReadOnlySequence<byte> body)
    {
        if (request.Counts is { } counts)
        {
            counts.Out += body.Length; // as the counting writer counts what is written, sent or not
        }
        return request.Exchange.LendResponseBodyAsync(body);
    }

    public void RevokeLentResponseBody() => request.Exchange.RevokeLentResponseBody();

    public void ClearResponse() => request.ClearResponse();

    public void SetGrpcTrailersOnly(int status, string message) => request.SetGrpcTrailersOnly(status, message);

    public ValueTask WriteTextResponseAsync(int status, string text, CancellationToken cancellationToken) =>
        request.WriteTextResponseAsync(status, text, cancellationToken);

    public void RecordError(ForwarderError error, Exception? exception, bool clientDeadlineExpired) => request.RecordError(error, clientDeadlineExpired);

    public bool ClientDeadlineExpired => request.ClientDeadlineExpired;

    public string Reset(int http2Code)
    {
        Exchange.Abort((uint)http2Code);
        return !request.IsHttp2 ? "connection abort" : http2Code == 0x8 ? "RST_STREAM(CANCEL)" : "RST_STREAM(INTERNAL_ERROR)";
    }

    public bool EndsResponse => true;

    public ValueTask EndAsync(Exception? failure) => request.EndAsync(failure);
}
