using System.Net;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Telemetry;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Forwarder;

/// <summary>The forwarder: one request in, one backend exchange, the response streamed back.</summary>
/// <remarks>
/// NOTE: an SSE response has no natural end, so a graceful shutdown would wait for it until the host's shutdown timeout
/// (30 s by default) and then abort it. When the host's <see cref="IHostApplicationLifetime.ApplicationStopping"/> fires,
/// each forwarded event stream ends instead, cleanly (the client sees the end of the body, and an EventSource
/// reconnects, to another instance if there is one), and the backend's stream is cancelled. gRPC calls and other
/// responses keep the drain: they end on their own.
/// </remarks>
// Stateless and shared; all per-request state lives in locals of SendCoreAsync.
internal sealed partial class HttpForwarder(ILogger<HttpForwarder> logger, ForwardingMetrics metrics, TimeProvider time, IHostApplicationLifetime? lifetime = null)
    : IHttpForwarder
{
    private readonly CancellationToken _stopping = lifetime?.ApplicationStopping ?? CancellationToken.None;

    /// <summary>YARP's default quiet period; not applied to SSE and gRPC unless configured. Settable for tests.</summary>
    internal TimeSpan DefaultActivityTimeout { get; set; } = TimeSpan.FromSeconds(100);

    // RFC 9113 §7: the reset codes. NOTE: YARP swaps these two; CANCEL is 0x8, INTERNAL_ERROR is 0x2.
    private const int Http2Cancel = 0x8;
    private const int Http2InternalError = 0x2;

    public async ValueTask<ForwarderError> SendAsync(HttpContext context, string destinationPrefix, HttpMessageInvoker httpClient,
        ForwarderRequestConfig requestConfig, HttpTransformer transformer)
    {
        ArgumentNullException.ThrowIfNull(context);
        ArgumentNullException.ThrowIfNull(destinationPrefix);
        ArgumentNullException.ThrowIfNull(httpClient);
        var proxy = context.Features.Get<IReverseProxyFeature>();
        var started = metrics.RequestStarted(proxy?.ClusterId);
        var activity = ForwardingTracing.Start(context, proxy);
        var error = ForwarderError.Request;
        try
        {
            error = await SendCoreAsync(context, destinationPrefix, httpClient, requestConfig ?? ForwarderRequestConfig.Empty,
                transformer ?? HttpTransformer.Default).ConfigureAwait(false);
            return error;
        }
        finally
        {
            metrics.RequestEnded(started, proxy?.RouteId, proxy?.ClusterId, context.Response.StatusCode, error);
            if (activity is not null)
            {
                ForwardingTracing.Stop(activity, context.Response.StatusCode, error);
            }
        }
    }

    private async ValueTask<ForwarderError> SendCoreAsync(HttpContext context, string destinationPrefix, HttpMessageInvoker httpClient,
        ForwarderRequestConfig config, HttpTransformer transformer)
    {
        // Step 1: classify the call and set up cancellation. gRPC is known from the request; SSE only
        // once the response headers arrive. NOTE: long-lived streams must not inherit the 100 s
        // activity timeout unless someone asked for it (YARP #1764 kills quiet SSE that way).
        var (isGrpc, deadline, deadlineFromClient) = Classify(new HttpContextFront(context), config);
        if (await RejectMalformedAsync(new HttpContextFront(context)).ConfigureAwait(false))
        {
            return ForwarderError.RequestMalformed;
        }

        var activityTimeout = config.ActivityTimeout ?? (isGrpc ? Timeout.InfiniteTimeSpan : DefaultActivityTimeout);
        using var cancellation = new ForwardingCancellation(context.RequestAborted, activityTimeout, deadline, deadlineFromClient, time,
            ForwardingCancellation.RequestTimeoutOf(context));
        using var requestBodyCancellation = CancellationTokenSource.CreateLinkedTokenSource(cancellation.Token);

        // Step 2: build the backend request from validated pieces; the body is streamed, never buffered.
        var proxyRequest = new HttpRequestMessage
        {
            Method = HttpMethod.Parse(context.Request.Method),
            Version = config.Version ?? HttpVersion.Version20,
            VersionPolicy = config.VersionPolicy ?? HttpVersionPolicy.RequestVersionOrLower,
        };
        StreamingRequestContent? requestContent = null;
        if (HasRequestBody(context))
        {
            // NOTE: gRPC client streaming and bidi need every message flushed as it arrives.
            requestContent = new StreamingRequestContent(context.Request.Body, flushEveryWrite: isGrpc, cancellation, requestBodyCancellation.Token);
            proxyRequest.Content = requestContent;
        }
        else if (isGrpc)
        {
            // NOTE: HttpClient carries Content-Type on the content only, and a gRPC call needs it even when its request
            // stream is empty (Kestrel reports such a stream as bodiless when END_STREAM came before the app looked):
            // without this the backend answers "Content-Type is missing from the request".
            proxyRequest.Content = new ByteArrayContent([]);
        }

        // Step 3: transforms set the URI and copy the headers (minus hop-by-hop ones).
        await transformer.TransformRequestAsync(context, proxyRequest, destinationPrefix, cancellation.Token).ConfigureAwait(false);
        if (ForwardingTracing.Current is { } span)
        {
            ForwardingTracing.Inject(span, proxyRequest); // after the transforms: the proxy's span is the backend's parent
        }

        // Step 4: send, and wait only for the response headers (HttpMessageInvoker never buffers).
        HttpResponseMessage response;
        try
        {
            response = await httpClient.SendAsync(proxyRequest, cancellation.Token).ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            var error = ClassifySendFailure(cancellation, requestContent);
            ReportBeforeResponse(new HttpContextFront(context), error, ex, isGrpc, cancellation);
            // Lets "When: Failure" response transforms decorate the error response.
            await transformer.TransformResponseAsync(context, null, CancellationToken.None).ConfigureAwait(false);
            return error;
        }

        using (response)
        {
            // Step 5: status and headers to the client.
            context.Response.StatusCode = (int)response.StatusCode;
            var copyBody = await transformer.TransformResponseAsync(context, response, cancellation.Token).ConfigureAwait(false);
            if (config.AllowResponseBuffering != true)
            {
                context.Features.Get<IHttpResponseBodyFeature>()?.DisableBuffering();
            }

            var eventStream = IsEventStream(response);
            if (config.ActivityTimeout is null && eventStream)
            {
                cancellation.SetActivityTimeout(Timeout.InfiniteTimeSpan);
            }

            if (eventStream)
            {
                cancellation.EndOnShutdown(_stopping);
            }

            using var sse = metrics.SseStream(eventStream, context.Features.Get<IReverseProxyFeature>());

            // Step 6: send the headers NOW, before reading any body. NOTE: a gRPC bidi call whose
            // server sends headers first and then waits for the client must see those headers, or
            // both sides wait forever (YARP #2520).
            // NOTE: not for a gRPC trailers-only response (grpc-status already in the headers): it must
            // stay one HEADERS frame with END_STREAM. Started early, the status goes out in headers that
            // do not end the stream, and a client such as grpc-js reports "call ended without gRPC status".
            var trailersOnly = isGrpc && response.Headers.Contains("grpc-status");
            try
            {
                // NOTE: StartAsync only commits the headers; a server may keep them in its output
                // buffer until the first flush (Kestrel does), which is exactly the hang above. A
                // body of known length is not a stream that waits on its peer, so its headers may
                // ride with the first DATA write and save a packet.
                if (!trailersOnly)
                {
                    await context.Response.StartAsync(cancellation.Token).ConfigureAwait(false);
                    if (response.Content.Headers.ContentLength is null)
                    {
                        await context.Response.Body.FlushAsync(cancellation.Token).ConfigureAwait(false);
                    }
                }
            }
            catch (Exception ex)
            {
                var error = cancellation.ClientAborted ? ForwarderError.ResponseBodyCanceled : ForwarderError.ResponseBodyClient;
                return await FailAfterResponseStartedAsync(context, error, ex, cancellation, requestContent, requestBodyCancellation).ConfigureAwait(false);
            }

            // Step 7: stream the body, flushing after every read so each SSE event leaves at once.
            if (copyBody)
            {
                var (result, copyError) = await CopyResponseBodyAsync(response, context, cancellation).ConfigureAwait(false);
                if (result == StreamCopyResult.Canceled && cancellation.ShuttingDown)
                {
                    // An event stream ended for shutdown: the response completes normally (no trailers to wait for), and
                    // disposing the backend response cancels the backend's stream.
                    var feature = context.Features.Get<IReverseProxyFeature>();
                    Log.EventStreamEndedForShutdown(logger, feature?.RouteId, feature?.ClusterId);
                    requestBodyCancellation.Cancel();
                    if (requestContent is { Started: true })
                    {
                        await requestContent.Completion.ConfigureAwait(false);
                    }

                    return ForwarderError.None;
                }

                if (result != StreamCopyResult.Success)
                {
                    var error = ClassifyResponseBodyFailure(result, cancellation, requestContent);
                    return await FailAfterResponseStartedAsync(context, error, copyError, cancellation, requestContent, requestBodyCancellation).ConfigureAwait(false);
                }
            }

            // Step 8: trailers (gRPC's grpc-status lives there); only available after the body.
            await transformer.TransformResponseTrailersAsync(context, response, cancellation.Token).ConfigureAwait(false);
        }

        // Step 9: the response is complete. A request body still streaming is no longer wanted (a gRPC
        // server may finish before the client stops sending): stop it instead of waiting on the client.
        if (requestContent is { Started: true })
        {
            if (!requestContent.Completion.IsCompleted)
            {
                requestBodyCancellation.Cancel();
            }

            await requestContent.Completion.ConfigureAwait(false);
        }

        return ForwarderError.None;
    }

    /// <summary>
    /// Step 1 of both paths: gRPC or not, and the deadline (the route's, shortened by a gRPC call's <c>grpc-timeout</c>; then
    /// it is the client's own, and its expiry is the client's outcome, not a slow backend's).
    /// </summary>
    private static (bool IsGrpc, TimeSpan? Deadline, bool DeadlineFromClient) Classify<TFront>(TFront front, ForwarderRequestConfig config)
        where TFront : IForwardingFront
    {
        var isGrpc = GrpcProtocol.IsGrpc(front.RequestContentType);
        var deadline = config.Timeout;
        if (isGrpc && GrpcProtocol.ParseTimeout(front.RequestHeader("grpc-timeout")) is { } grpcTimeout
            && (deadline is null || grpcTimeout < deadline))
        {
            return (isGrpc, grpcTimeout, true);
        }

        return (isGrpc, deadline, false);
    }

    /// <summary>Never forward a malformed request (RFC 9113 §8.1.1): answers 400 with the reason and returns true; the backend sees nothing.</summary>
    private async ValueTask<bool> RejectMalformedAsync<TFront>(TFront front)
        where TFront : IForwardingFront
    {
        if (front.FindMalformation() is not { } malformation)
        {
            return false;
        }

        ReportBeforeResponse(front, ForwarderError.RequestMalformed, new InvalidOperationException("Malformed request: " + malformation), isGrpc: false, cancellation: null);
        if (!front.HasStarted)
        {
            await front.WriteTextResponseAsync(front.StatusCode, "Malformed request: " + malformation + "\n", CancellationToken.None).ConfigureAwait(false);
        }

        return true;
    }

    private static async ValueTask<(StreamCopyResult, Exception?)> CopyResponseBodyAsync(HttpResponseMessage response, HttpContext context,
        ForwardingCancellation cancellation)
    {
        Stream source;
        try
        {
            source = await response.Content.ReadAsStreamAsync(cancellation.Token).ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            return (cancellation.Token.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.InputError, ex);
        }

        await using (source.ConfigureAwait(false))
        {
            var (result, error, _) = await StreamCopier.CopyAsync(source, context.Response.Body, flushEveryWrite: true, cancellation, cancellation.Token)
                .ConfigureAwait(false);
            return (result, error);
        }
    }

    private static bool HasRequestBody(HttpContext context)
    {
        // The server knows best (HTTP/2: no END_STREAM on HEADERS; HTTP/1.1: Content-Length > 0 or chunked).
        if (context.Features.Get<IHttpRequestBodyDetectionFeature>() is { } detection)
        {
            return detection.CanHaveBody;
        }

        return context.Request.ContentLength > 0 || context.Request.Headers.ContainsKey("Transfer-Encoding");
    }

    private static bool IsEventStream(HttpResponseMessage response) =>
        string.Equals(response.Content.Headers.ContentType?.MediaType, "text/event-stream", StringComparison.OrdinalIgnoreCase);

    private static ForwarderError ClassifySendFailure(ForwardingCancellation cancellation, StreamingRequestContent? content)
    {
        if (content is { Started: true } && content.Completion.IsCompletedSuccessfully)
        {
            var bodyResult = content.Completion.Result.Result;
            if (bodyResult == StreamCopyResult.InputError)
            {
                return ForwarderError.RequestBodyClient;
            }

            if (bodyResult == StreamCopyResult.OutputError)
            {
                return ForwarderError.RequestBodyDestination;
            }
        }

        if (cancellation.ClientAborted)
        {
            return ForwarderError.RequestCanceled;
        }

        return cancellation.TimedOut ? ForwarderError.RequestTimedOut : ForwarderError.Request;
    }

    private static ForwarderError ClassifyResponseBodyFailure(StreamCopyResult result, ForwardingCancellation cancellation, StreamingRequestContent? content)
    {
        // Over HTTP/2 a failing request body resets the backend stream, which surfaces here.
        if (content is { Started: true } && content.Completion.IsCompletedSuccessfully)
        {
            var bodyResult = content.Completion.Result.Result;
            if (bodyResult == StreamCopyResult.InputError)
            {
                return ForwarderError.RequestBodyClient;
            }

            if (bodyResult == StreamCopyResult.OutputError)
            {
                return ForwarderError.RequestBodyDestination;
            }
        }

        return result switch
        {
            _ when cancellation.ClientAborted => ForwarderError.ResponseBodyCanceled,
            _ when cancellation.TimedOut => ForwarderError.ResponseBodyTimedOut,
            StreamCopyResult.OutputError => ForwarderError.ResponseBodyClient,
            _ => ForwarderError.ResponseBodyDestination,
        };
    }

    /// <summary>Nothing was sent to the client yet: answer with a status (or a gRPC status).</summary>
    private void ReportBeforeResponse<TFront>(TFront front, ForwarderError error, Exception? exception, bool isGrpc, ForwardingCancellation? cancellation)
        where TFront : IForwardingFront
    {
        var deadlineExpired = cancellation?.DeadlineExpired == true;
        front.RecordError(error, exception, cancellation?.ClientDeadlineExpired == true);
        if (!front.HasStarted)
        {
            front.ClearResponse();
            if (isGrpc)
            {
                var (status, message) = error switch
                {
                    ForwarderError.RequestTimedOut when deadlineExpired => (GrpcProtocol.StatusDeadlineExceeded, "Deadline exceeded while waiting for the backend."),
                    ForwarderError.RequestTimedOut => (GrpcProtocol.StatusUnavailable, "The backend did not respond in time."),
                    ForwarderError.RequestBodyClient => (GrpcProtocol.StatusInternal, "Reading the request body failed."),
                    _ => (GrpcProtocol.StatusUnavailable, "The backend is unavailable."),
                };
                front.SetGrpcTrailersOnly(status, message);
            }
            else
            {
                front.StatusCode = BodyTooLarge(exception) ? StatusCodes.Status413PayloadTooLarge : StatusFor(error);
            }
        }

        Log.Outcome(logger, error, front.Proxy, front.StatusCode, exception, cancellation?.ClientDeadlineExpired == true);
    }

    /// <summary>The server refused the request body as larger than its limit (MaxRequestBodySize): the client's fault, told as 413.</summary>
    private static bool BodyTooLarge(Exception? exception)
    {
        for (var e = exception; e is not null; e = e.InnerException)
        {
            if (e is BadHttpRequestException { StatusCode: StatusCodes.Status413PayloadTooLarge })
            {
                return true;
            }
        }

        return false;
    }

    internal static int StatusFor(ForwarderError error) => error switch
    {
        ForwarderError.RequestTimedOut => StatusCodes.Status504GatewayTimeout,
        ForwarderError.RequestBodyClient or ForwarderError.RequestMalformed => StatusCodes.Status400BadRequest,
        ForwarderError.NoAvailableDestinations or ForwarderError.QueueTimeout or ForwarderError.QueueFull => StatusCodes.Status503ServiceUnavailable,
        _ => StatusCodes.Status502BadGateway,
    };

    /// <summary>
    /// Headers already went out: the only honest signal left is to break the client's stream, so it
    /// cannot mistake a truncated body for a complete one.
    /// </summary>
    private async ValueTask<ForwarderError> FailAfterResponseStartedAsync(HttpContext context, ForwarderError error, Exception? exception,
        ForwardingCancellation cancellation, StreamingRequestContent? requestContent, CancellationTokenSource requestBodyCancellation)
    {
        context.Features.Set<IForwarderErrorFeature>(new ForwarderErrorFeature(error, exception) { ClientDeadlineExpired = cancellation.ClientDeadlineExpired });
        Log.Outcome(logger, error, context, exception, cancellation.ClientDeadlineExpired);

        // RFC 9113 §8.1: a stream that cannot complete is reset. CANCEL when the exchange was
        // abandoned (client gone, timeout), INTERNAL_ERROR when the backend broke it.
        var code = error is ForwarderError.ResponseBodyDestination or ForwarderError.RequestBodyDestination ? Http2InternalError : Http2Cancel;
        var reset = context.Features.Get<IHttpResetFeature>();
        if (reset is not null)
        {
            Log.AbortingClient(logger, code == Http2Cancel ? "RST_STREAM(CANCEL)" : "RST_STREAM(INTERNAL_ERROR)", error);
            reset.Reset(code);
        }
        else
        {
            Log.AbortingClient(logger, "connection abort", error);
            context.Abort();
        }

        if (requestContent is { Started: true })
        {
            requestBodyCancellation.Cancel();
            try
            {
                await requestContent.Completion.ConfigureAwait(false);
            }
            catch (Exception)
            {
                // The outcome is already decided; the body copy only has to stop.
            }
        }

        return error;
    }
}
