using System.Buffers;
using System.IO.Pipelines;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Telemetry;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Forwarder;

// The native path: the same steps and outcomes as SendCoreAsync, with the backend exchange on a native transport (our own
// client connections) instead of HttpClient. Request fields are built once from the request's decoded headers; body
// bytes move pipe to pipe; credit flows end to end because each pump consumes its input only after its output took it.
internal sealed partial class HttpForwarder
{
    /// <summary>
    /// Forwards through <paramref name="native"/> when the cluster has one (and the transformer can fill a native head),
    /// otherwise through <paramref name="httpClient"/>. Outcomes, statuses and resets are the same either way.
    /// </summary>
    internal ValueTask<ForwarderError> SendAsync(HttpContext context, string destinationPrefix, HttpMessageInvoker httpClient,
        ForwarderRequestConfig requestConfig, HttpTransformer transformer, IForwarderClusterTransport? native)
        => native is null
            ? SendAsync(context, destinationPrefix, httpClient, requestConfig, transformer)
            : SendNativeAsync(new HttpContextFront(context), destinationPrefix, httpClient, requestConfig ?? ForwarderRequestConfig.Empty,
                transformer ?? HttpTransformer.Default, native);

    /// <summary>
    /// The direct path's entry (Proxy.Relay): forwards a request that has no HttpContext through <paramref name="native"/>.
    /// The route's transformer must fill a native head (the direct path takes only such routes).
    /// </summary>
    /// <remarks>
    /// With <paramref name="end"/> (the endpoint handler started the request without a frame of its own) the task also runs
    /// the handler's end of the request and the front's (<see cref="IForwardingFront.EndAsync"/>), and an exception is
    /// the front's to answer, not the caller's.
    /// </remarks>
    internal ValueTask<ForwarderError> SendDirectAsync<TFront>(TFront front, string destinationPrefix, ForwarderRequestConfig requestConfig,
        HttpTransformer transformer, IForwarderClusterTransport native, Routing.ForwardEnd? end = null)
        where TFront : IForwardingFront
        => SendNativeAsync(front, destinationPrefix, httpClient: null, requestConfig, transformer, native, end);

    // NOTE: the metrics and the span are taken here rather than in a wrapper awaiting this method, as SendAsync does for
    // the HttpClient path: one async frame fewer per request, and one state-machine box fewer (about 200 bytes) kept for
    // an SSE stream's life.
    private async ValueTask<ForwarderError> SendNativeAsync<TFront>(TFront front, string destinationPrefix, HttpMessageInvoker? httpClient,
        ForwarderRequestConfig config, HttpTransformer transformer, IForwarderClusterTransport native, Routing.ForwardEnd? end = null)
        where TFront : IForwardingFront
    {
        var proxy = front.Proxy;
        var started = metrics.RequestStarted(proxy?.ClusterId);
        System.Diagnostics.Activity? activity = null;
        var outcome = ForwarderError.Request;
        Exception? failure = null;
        try
        {
            // In the try: an ActivityListener's callback runs in it, and what it throws must still end the request below.
            activity = front.StartActivity();

            // Step 1: classify and validate, exactly as the HttpClient path does.
            var (isGrpc, deadline, deadlineFromClient) = Classify(front, config);
            if (await RejectMalformedAsync(front).ConfigureAwait(false))
            {
                return outcome = ForwarderError.RequestMalformed;
            }

            // Step 2: the request head from the decoded fields, transforms applied. A derived transformer only knows
            // HttpRequestMessage: that request goes through HttpClient.
            var destination = NativeDestination.For(destinationPrefix);
            // Room for the client's fields, the default X-Forwarded-For/Proto/Host/Prefix, and what the transport adds in
            // the same list (HTTP/2: the pseudo-headers), so it never grows.
            var head = new ForwarderRequestHead(front.RequestHeaderCount + 4 + native.FieldsAddedToHead)
            {
                Method = front.Method,
                Authority = destination.Authority,
                HasBody = front.HasRequestBody,
                ContinueOnEventLoop = front.MayContinueOnEventLoop,
                HttpContext = front.HttpContext,
            };
            if (head.HasBody)
            {
                head.ContentLength = front.RequestContentLength;
            }

            if (!front.TryTransformRequest(transformer, head, destination))
            {
                var context = front.HttpContext ?? throw new InvalidOperationException("A request without HttpContext reached a transformer that needs one.");
                return outcome = await SendCoreAsync(context, destinationPrefix, httpClient!, config, transformer).ConfigureAwait(false);
            }

            TakeHostField(head);
            if (ForwardingTracing.Current is { } span)
            {
                ForwardingTracing.Inject(span, head); // after the transforms: the proxy's span is the backend's parent
            }
            var activityTimeout = config.ActivityTimeout ?? (isGrpc ? Timeout.InfiniteTimeSpan : DefaultActivityTimeout);
            using var cancellation = new ForwardingCancellation(front.RequestAborted, activityTimeout, deadline, deadlineFromClient, time,
                front.RequestTimeout);

            // Step 2b: a small body of declared length is received whole before anything goes to the backend. A body that
            // disagrees with its content-length makes the request malformed (RFC 9113 §8.1.1), and a malformed request is
            // never forwarded, not even its head. The host server checks the length; here we wait for its verdict.
            var prebuffered = head.ContentLength is > 0 and <= MaxPrebufferedBody;
            if (prebuffered && !await PrebufferDeclaredBodyAsync(front.RequestBody, head.ContentLength!.Value, cancellation).ConfigureAwait(false))
            {
                // NOTE: a timeout that fired while the body was still on its way (a gRPC call's own deadline, the activity
                // or route timeout) is a timeout, not a broken body: the outcome it has when it fires later (a call's own
                // deadline grpc-status 4, another timeout 14 for gRPC and 504 for HTTP). It was told as the client's bad
                // body (grpc-status 13, HTTP 400) when the deadline beat a slow client's DATA frame.
                var error = cancellation.ClientAborted ? ForwarderError.RequestCanceled
                    : cancellation.TimedOut ? ForwarderError.RequestTimedOut
                    : ForwarderError.RequestBodyClient;
                Exception reason = error == ForwarderError.RequestTimedOut
                    ? new TimeoutException("The exchange timed out before the whole request body arrived.")
                    : new InvalidOperationException("The request body did not match its content-length.");
                ReportBeforeResponse(front, error, reason, isGrpc, cancellation);
                return outcome = error;
            }

            // The body is whole in the client's reader: the pump below writes and flushes it before anything waits, so the
            // backend head may go with it (PumpRequestBodyAsync's first read completes at once).
            head.BodyFollowsAtOnce = prebuffered;

            // Step 3: a pooled connection, and the head on its way.
            ForwarderBackendCall call;
            try
            {
                call = await native.StartAsync(proxy?.DestinationId, destinationPrefix, head, cancellation.Token).ConfigureAwait(false);
            }
            catch (Exception ex)
            {
                var error = cancellation.ClientAborted ? ForwarderError.RequestCanceled
                    : cancellation.TimedOut ? ForwarderError.RequestTimedOut
                    : ForwarderError.Request;
                ReportBeforeResponse(front, error, ex, isGrpc, cancellation);
                front.TransformResponse(transformer, null);
                return outcome = error;
            }

            await using (call.ConfigureAwait(false))
            {
                // Step 4: the request body streams beside the response (gRPC client streaming and bidi need both at once).
                // It runs inline until it has to wait: a unary call's body is usually complete already.
                var requestBody = front.RequestBody;
                var requestPump = head.HasBody ? PumpRequestBodyAsync(requestBody, call, cancellation) : null;
                // NOTE: the head went to the transport; this frame lives as long as the exchange (hours for SSE) and
                // would otherwise keep the head and its field list.
                head = null!;

                try
                {
                    // Step 5: the response head.
                    try
                    {
                        await call.ReadResponseHeadAsync(cancellation.Token).ConfigureAwait(false);
                    }
                    catch (Exception ex)
                    {
                        // The pump first: a client body that broke aborts the call, and its InputError must decide the outcome
                        // (400, the client's fault) rather than the head failure that abort caused (502).
                        call.Abort();
                        await StopRequestPumpAsync(requestPump, requestBody, call).ConfigureAwait(false);
                        var error = ClassifyNativeHeadFailure(ex, cancellation, requestPump);
                        ReportBeforeResponse(front, error, ex, isGrpc, cancellation);
                        front.TransformResponse(transformer, null);
                        return outcome = error;
                    }

                    // Step 6: status and headers to the client.
                    front.StatusCode = call.StatusCode;
                    front.TransformResponse(transformer, call);
                    if (config.AllowResponseBuffering != true)
                    {
                        front.DisableBuffering();
                    }

                    var eventStream = IsEventStream(front.ResponseContentType);
                    if (config.ActivityTimeout is null && eventStream)
                    {
                        cancellation.SetActivityTimeout(Timeout.InfiniteTimeSpan);
                    }

                    if (eventStream)
                    {
                        cancellation.EndOnShutdown(_stopping); // see the NOTE on the class
                    }

                    using var sse = metrics.SseStream(eventStream, proxy);

                    // Step 7: headers now, before any body byte (YARP #2520), except for a gRPC trailers-only response (one
                    // HEADERS frame with END_STREAM), a body of known length, or a body whose bytes are already here: then
                    // the headers ride with them and a unary call leaves in one write.
                    var trailersOnly = isGrpc && HasField(call.ResponseHeaders, "grpc-status");
                    bool bodyReady;
                    // The whole body when it is here already and small enough for one chunk: it is copied below without the
                    // pump (a unary call's response, a small GET's). Held unconsumed until then.
                    var wholeBody = default(ReadOnlySequence<byte>?);
                    try
                    {
                        bodyReady = call.ResponseBody.TryRead(out var peek);
                        if (bodyReady && peek.IsCompleted && !peek.IsCanceled && peek.Buffer.Length <= MaxRelayChunk)
                        {
                            wholeBody = peek.Buffer;
                        }
                        else if (bodyReady)
                        {
                            call.ResponseBody.AdvanceTo(peek.Buffer.Start);
                        }
                    }
                    catch (Exception)
                    {
                        // The body already failed (the backend sent its head, some bytes, then a reset): the head still goes out
                        // first, as on the HttpClient path, then the pump below meets the failure and resets the client's stream.
                        bodyReady = false;
                    }

                    var responseBody = front.ResponseBody;
                    if (!trailersOnly && !bodyReady && front.ResponseContentLength is null)
                    {
                        try
                        {
                            await front.StartResponseAsync(cancellation.Token).ConfigureAwait(false);
                            await responseBody.FlushAsync(cancellation.Token).ConfigureAwait(false);
                        }
                        catch (Exception ex)
                        {
                            var error = cancellation.ClientAborted ? ForwarderError.ResponseBodyCanceled : ForwarderError.ResponseBodyClient;
                            return outcome = await FailNativeAfterResponseStartedAsync(front, call, error, ex, cancellation, requestPump, requestBody).ConfigureAwait(false);
                        }
                    }

                    // Step 8: the body, pipe to pipe, flushed per read so each SSE event or gRPC message leaves at once.
                    var (result, copyError) = wholeBody is { } body
                        ? CopyWholeResponseBody(front, call, body, responseBody, cancellation)
                        : await PumpResponseBodyAsync(front, call, responseBody, cancellation).ConfigureAwait(false);
                    if (result == StreamCopyResult.Canceled && cancellation.ShuttingDown)
                    {
                        // An event stream ended for shutdown: the backend's stream is reset, the client's completes normally.
                        Log.EventStreamEndedForShutdown(logger, proxy?.RouteId, proxy?.ClusterId);
                        call.Abort();
                        return outcome = ForwarderError.None;
                    }

                    if (result != StreamCopyResult.Success)
                    {
                        var error = ClassifyNativeBodyFailure(result, cancellation, requestPump);
                        return outcome = await FailNativeAfterResponseStartedAsync(front, call, error, copyError, cancellation, requestPump, requestBody).ConfigureAwait(false);
                    }

                    // Step 9: trailers (gRPC's status).
                    front.TransformTrailers(transformer, call);

                    // Step 10: the response is complete; a request body still streaming is no longer wanted.
                    await StopRequestPumpAsync(requestPump, requestBody, call).ConfigureAwait(false);
                }
                finally
                {
                    // Whatever ended the exchange (an exception in a transform included), the pump never outlives it.
                    await StopRequestPumpAsync(requestPump, requestBody, call).ConfigureAwait(false);
                }
            }

            return outcome = ForwarderError.None;
        }
        catch (Exception ex) when (end is not null)
        {
            failure = ex; // the endpoint handler's rule: the front answers it (ProxyEndpointHandler.ForwardStepsAsync)
            return outcome;
        }
        finally
        {
            try
            {
                metrics.RequestEnded(started, proxy?.RouteId, proxy?.ClusterId, front.StatusCode, outcome);
                if (activity is not null)
                {
                    ForwardingTracing.Stop(activity, front.StatusCode, outcome);
                }
            }
            catch (Exception ex) when (end is not null)
            {
                failure ??= ex; // a listener's callback threw: the request still ends below
            }
            finally
            {
                // Step 11, for a request the endpoint handler started at once: the handler's end, then the front's.
                if (end is { } handlerEnd)
                {
                    try
                    {
                        handlerEnd.Ended(front, outcome, ref failure);
                    }
                    catch (Exception ex)
                    {
                        failure ??= ex;
                    }
                    await front.EndAsync(failure).ConfigureAwait(false);
                }
            }
        }
    }

    /// <summary>
    /// Bytes one pump turn moves from one side to the other before it waits for the other side to take them (the
    /// stream output buffers' size): a relayed stream holds about one backend window plus this much.
    /// </summary>
    private const int MaxRelayChunk = 64 * 1024;

    /// <summary>
    /// The smallest chunk the response pump lends instead of copying (a full DATA frame). Below it a copy costs less than
    /// the hand-over: a 1 KB response lent instead of copied took a send of its own for its END_STREAM in 8% of requests.
    /// </summary>
    private const int MinLentChunk = 16 * 1024;

    /// <summary>Largest declared body received whole before the head is forwarded (within every stream window we grant).</summary>
    private const long MaxPrebufferedBody = 64 * 1024;

    /// <summary>Waits until the whole declared body arrived, without consuming it. False when reading it failed (malformed, reset).</summary>
    /// <remarks>
    /// NOTE: not an async method on the common path: a small body usually arrived with its head, and a read that finds it
    /// whole returns at once; only a body still arriving (or a reader that must start with an await, HTTP/1.1's 100
    /// Continue) goes through <see cref="PrebufferWaitingAsync"/>.
    /// </remarks>
    private static ValueTask<bool> PrebufferDeclaredBodyAsync(PipeReader reader, long declared, ForwardingCancellation cancellation)
    {
        if (cancellation.Token.IsCancellationRequested)
        {
            return PrebufferWaitingAsync(reader, declared, cancellation); // its read fails at once, as it did
        }

        ReadResult read;
        try
        {
            if (!reader.TryRead(out read))
            {
                return PrebufferWaitingAsync(reader, declared, cancellation);
            }
        }
        catch (Exception)
        {
            return new ValueTask<bool>(false);
        }

        var complete = read.IsCompleted || read.Buffer.Length > declared;
        reader.AdvanceTo(read.Buffer.Start, read.Buffer.End);
        return complete ? new ValueTask<bool>(true) : PrebufferWaitingAsync(reader, declared, cancellation);
    }

    private static async ValueTask<bool> PrebufferWaitingAsync(PipeReader reader, long declared, ForwardingCancellation cancellation)
    {
        while (true)
        {
            ReadResult read;
            try
            {
                read = await reader.ReadAsync(cancellation.Token).ConfigureAwait(false);
            }
            catch (Exception)
            {
                return false;
            }

            var complete = read.IsCompleted || read.Buffer.Length > declared;
            reader.AdvanceTo(read.Buffer.Start, read.Buffer.End);
            if (complete)
            {
                return true;
            }
        }
    }

    /// <summary>A transform that set Host chose the authority: HTTP/2 carries it as :authority, HTTP/1.1 as Host (built by the transport).</summary>
    private static void TakeHostField(ForwarderRequestHead head)
    {
        for (var i = head.Headers.Count - 1; i >= 0; i--)
        {
            if (string.Equals(head.Headers[i].Key, "Host", StringComparison.OrdinalIgnoreCase))
            {
                head.Authority = head.Headers[i].Value;
                head.Headers.RemoveAt(i);
            }
        }
    }

    private static bool HasField(IReadOnlyList<KeyValuePair<string, string>> fields, string name)
    {
        foreach (var field in fields)
        {
            if (string.Equals(field.Key, name, StringComparison.OrdinalIgnoreCase))
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>
    /// Appends one segment of relayed bytes a block at a time: <c>BuffersExtensions.Write</c> asks for every block with no
    /// size hint, so a pipe gives it its minimum segment each time (256 bytes in the engine's stream pipes), and one
    /// <c>GetSpan</c> of the whole remainder (up to 64 KiB here) a pipe of 4 KiB blocks serves from a fresh pooled array.
    /// The engine has the same loop (Proxy.Protocols' StreamPipeWrites); this layer does not reference the engine.
    /// Each block is asked for with a hint of what is left, up to 4 KiB (the engine's stream pool serves 256-byte, 1 KiB
    /// and 4 KiB blocks below that): an SSE event of a few dozen bytes takes a 256-byte block, not 4 KiB.
    /// </summary>
    private static void WriteInBlocks(PipeWriter output, ReadOnlySpan<byte> source, int blockSize)
    {
        while (!source.IsEmpty)
        {
            // A whole large block only while that much is left (a bulk body: one block per DATA frame on HTTP/2); less
            // than that goes into blocks of at most 4 KiB, so a small message never holds a large block.
            var hint = source.Length >= blockSize ? blockSize : Math.Min(source.Length, Math.Min(blockSize, MidBlockSize));
            var destination = output.GetSpan(hint);
            var count = Math.Min(destination.Length, source.Length);
            source[..count].CopyTo(destination);
            output.Advance(count);
            source = source[count..];
        }
    }

    // The stream pools' middle block (BlockMemoryPool.StreamBlockSize), and Kestrel's block.
    private const int MidBlockSize = 4096;

    private static bool IsEventStream(string? contentType) =>
        contentType is not null && contentType.AsSpan().TrimStart().StartsWith("text/event-stream", StringComparison.OrdinalIgnoreCase);

    /// <summary>
    /// Client body to backend: each read is written into the backend stream and flushed; the client's bytes are consumed
    /// (and its credit returned) only once the backend side took them, so a slow backend slows the client.
    /// </summary>
    /// <remarks>
    /// NOTE: no token: the pump is stopped with CancelPendingRead / CancelPendingFlush (StopRequestPumpAsync), and a client
    /// that goes away faults the read. That saves a linked token source per request.
    /// </remarks>
    private static async Task<StreamCopyResult> PumpRequestBodyAsync(PipeReader input, ForwarderBackendCall call, ForwardingCancellation activity)
    {
        var output = call.RequestBody;
        while (true)
        {
            ReadResult read;
            try
            {
                read = await input.ReadAsync().ConfigureAwait(false);
            }
            catch (Exception)
            {
                // The client broke its upload (reset, bad framing): the backend must not take a truncated body as whole.
                call.Abort();
                return StreamCopyResult.InputError;
            }

            var buffer = read.Buffer;
            try
            {
                if (read.IsCanceled)
                {
                    return StreamCopyResult.Canceled;
                }

                var readCompleted = read.IsCompleted;
                if (buffer.Length > MaxRelayChunk)
                {
                    buffer = buffer.Slice(0, MaxRelayChunk); // one chunk per turn, as for the response
                    readCompleted = false;
                }

                if (!buffer.IsEmpty)
                {
                    foreach (var segment in buffer)
                    {
                        WriteInBlocks(output, segment.Span, MidBlockSize);
                    }

                    activity.ResetActivity();
                    FlushResult flush;
                    try
                    {
                        flush = await output.FlushAsync().ConfigureAwait(false);
                    }
                    catch (Exception)
                    {
                        return StreamCopyResult.OutputError;
                    }

                    if (flush.IsCanceled)
                    {
                        return StreamCopyResult.Canceled;
                    }

                    if (flush.IsCompleted)
                    {
                        // The backend stream takes no more (it answered and ended, or reset): the response side decides.
                        return StreamCopyResult.Success;
                    }
                }

                if (readCompleted)
                {
                    await output.CompleteAsync().ConfigureAwait(false);
                    return StreamCopyResult.Success;
                }
            }
            finally
            {
                input.AdvanceTo(buffer.End);
            }
        }
    }

    /// <summary>
    /// Backend body to client: written and flushed per read (the flush waits while the client's stream is full), consumed
    /// from the backend only after, which is what returns the backend's credit. The last bytes of a complete body are not
    /// flushed here: completing the response sends them with the trailers in one write.
    /// </summary>
    /// <remarks>
    /// NOTE: a front that takes lent bodies (our server's HTTP/2 streams, on the direct path and, through the relay's
    /// <see cref="ForwarderBackendCall.ClientResponse"/>, on the pipeline) gets each chunk as the
    /// backend's own bytes: the client connection's writer frames them from the backend's buffer, and the pump consumes
    /// them once it let go. That saves a copy of every body byte (a fifth of the proxy's user time on 100 KB responses
    /// over h2c) and the stream pipe's blocks; the backend's buffer is then the only one the relay holds.
    /// </remarks>
    private static async ValueTask<(StreamCopyResult Result, Exception? Error)> PumpResponseBodyAsync<TFront>(TFront front, ForwarderBackendCall call,
        PipeWriter output, ForwardingCancellation activity)
        where TFront : IForwardingFront
    {
        var input = call.ResponseBody;
        var token = activity.Token;
        // On the pipeline over our server the relay knows the client's exchange behind the HttpContext: its blocks and
        // lending then serve this pump as they do on the direct path (null elsewhere: Kestrel, or a wrapped response body).
        var client = call.ClientResponse;
        var lend = client?.CanLend ?? front.CanLendResponseBody;
        var blockSize = client?.BlockSize ?? front.ResponseBodyBlockSize;
        // NOTE: at most one registration for the whole body, made when a read first has to wait, instead of one per
        // waiting read (the source kept each freed node for the next: two nodes per quiet SSE stream, and a
        // register/unregister pair per event). A unary call whose body is already here registers nothing. Cancellation
        // wakes the waiting read, which returns IsCanceled.
        // A plain local in try/finally, not a using variable: a using variable is read-only, so Register would act on a
        // defensive copy and the registration would never be disposed.
        var cancelRead = new ReadCancellation<TFront>(input, activity, front, client, lend);
        try
        {
            while (true)
            {
                if (token.IsCancellationRequested)
                {
                    return (StreamCopyResult.Canceled, new OperationCanceledException(token));
                }

                ReadResult read;
                try
                {
                    var pending = input.ReadAsync(CancellationToken.None);
                    if (!pending.IsCompleted)
                    {
                        cancelRead.Register();
                    }
                    read = await pending.ConfigureAwait(false);
                }
                catch (Exception ex)
                {
                    return (token.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.InputError, ex);
                }

                if (read.IsCanceled && token.IsCancellationRequested)
                {
                    // As a read given the token would have thrown: the outcome and the log carry the cancellation.
                    input.AdvanceTo(read.Buffer.Start);
                    return (StreamCopyResult.Canceled, new OperationCanceledException(token));
                }

                var buffer = read.Buffer;
                if (buffer.IsEmpty)
                {
                    input.AdvanceTo(buffer.End);
                    if (read.IsCompleted)
                    {
                        return (StreamCopyResult.Success, null);
                    }

                    continue;
                }

                // NOTE: at most one chunk per turn. A backend that filled its window would otherwise move the whole window
                // into the client's output in one write (the flush waits only after), and the proxy would hold two windows.
                var completed = read.IsCompleted;
                if (buffer.Length > MaxRelayChunk)
                {
                    buffer = buffer.Slice(0, MaxRelayChunk);
                    completed = false;
                }

                // NOTE: the body's last chunk is copied, not lent: copied, it leaves with the END_STREAM (or trailers) that
                // completing the response adds; lent, it left at once and the end followed in a send of its own.
                if (lend && !completed && buffer.Length >= MinLentChunk)
                {
                    bool sent;
                    try
                    {
                        var lending = client is null ? front.LendResponseBodyAsync(buffer) : LendToClientAsync(front, client, buffer, token);
                        if (!lending.IsCompleted)
                        {
                            cancelRead.Register(); // cancellation revokes the lend: the writer lets go of the bytes, then this returns
                            if (token.IsCancellationRequested && !activity.ShuttingDown)
                            {
                                // cancelled after the loop's check, before the lend was there to revoke
                                RevokeLent(front, client);
                            }
                        }
                        sent = await lending.ConfigureAwait(false);
                    }
                    catch (Exception ex)
                    {
                        // Thrown before the bytes were lent (the head's flush): nothing holds them.
                        input.AdvanceTo(buffer.End);
                        return (StreamCopyResult.OutputError, ex);
                    }

                    input.AdvanceTo(buffer.End);
                    if (!sent)
                    {
                        return (token.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.OutputError, null);
                    }

                    activity.ResetActivity();
                    continue;
                }

                if (CopyInBlocks(output, buffer, blockSize) is { } writeError)
                {
                    input.AdvanceTo(buffer.End);
                    return (StreamCopyResult.OutputError, writeError);
                }

                activity.ResetActivity();
                if (completed)
                {
                    input.AdvanceTo(buffer.End);
                    return (StreamCopyResult.Success, null);
                }

                FlushResult flush;
                try
                {
                    flush = await output.FlushAsync(token).ConfigureAwait(false);
                }
                catch (Exception ex)
                {
                    input.AdvanceTo(buffer.End);
                    return (token.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.OutputError, ex);
                }

                input.AdvanceTo(buffer.End);
                if (flush.IsCompleted || flush.IsCanceled)
                {
                    return (token.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.OutputError, null);
                }
            }
        }
        finally
        {
            cancelRead.Dispose();
        }
    }

    /// <summary>
    /// The pump's last turn for a body that was whole in the backend's reader before the pump would start
    /// (<paramref name="body"/>, read and not yet consumed): copied into the client's output, which completing the response
    /// flushes with its end.
    /// </summary>
    /// <remarks>
    /// NOTE: a small response's whole relay then runs without the pump's frame (about 1 KB zeroed per call) and its
    /// second read of the same bytes. A last chunk is copied, never lent, in the pump too.
    /// </remarks>
    private static (StreamCopyResult Result, Exception? Error) CopyWholeResponseBody<TFront>(TFront front, ForwarderBackendCall call,
        ReadOnlySequence<byte> body, PipeWriter output, ForwardingCancellation activity)
        where TFront : IForwardingFront
    {
        var input = call.ResponseBody;
        if (activity.Token.IsCancellationRequested)
        {
            input.AdvanceTo(body.Start);
            return (StreamCopyResult.Canceled, new OperationCanceledException(activity.Token));
        }

        if (CopyInBlocks(output, body, call.ClientResponse?.BlockSize ?? front.ResponseBodyBlockSize) is { } writeError)
        {
            input.AdvanceTo(body.End);
            return (StreamCopyResult.OutputError, writeError);
        }

        input.AdvanceTo(body.End);
        activity.ResetActivity();
        return (StreamCopyResult.Success, null);
    }

    /// <summary>Copies <paramref name="body"/> into the client's output in its blocks; the write's exception, or null.</summary>
    private static Exception? CopyInBlocks(PipeWriter output, ReadOnlySequence<byte> body, int blockSize)
    {
        try
        {
            foreach (var segment in body)
            {
                WriteInBlocks(output, segment.Span, blockSize);
            }
            return null;
        }
        catch (Exception ex)
        {
            return ex;
        }
    }

    /// <summary>
    /// A lend to the client's exchange behind the HttpContext: the response starts first through the HttpContext (its
    /// OnStarting callbacks and headers), as a flush of the body writer would start it.
    /// </summary>
    private static ValueTask<bool> LendToClientAsync<TFront>(TFront front, IClientResponseSink client, ReadOnlySequence<byte> body, CancellationToken token)
        where TFront : IForwardingFront
    {
        return front.HasStarted ? client.LendAsync(body) : StartThenLendAsync(front, client, body, token);

        static async ValueTask<bool> StartThenLendAsync(TFront front, IClientResponseSink client, ReadOnlySequence<byte> body, CancellationToken token)
        {
            await front.StartResponseAsync(token).ConfigureAwait(false);
            return await client.LendAsync(body).ConfigureAwait(false);
        }
    }

    private static void RevokeLent<TFront>(TFront front, IClientResponseSink? client)
        where TFront : IForwardingFront
    {
        if (client is null)
        {
            front.RevokeLentResponseBody();
        }
        else
        {
            client.Revoke();
        }
    }

    /// <summary>
    /// Wakes a pump's waiting read, and revokes its pending lend when it lends (<paramref name="lends"/>), when the exchange
    /// is cancelled; registers on the first wait only.
    /// </summary>
    /// <remarks>
    /// NOTE: a lend is not revoked for a shutdown: an event stream then ends normally (as with a copied chunk, whose bytes
    /// all go out before the end), so the chunk is sent whole rather than cut wherever the windows stopped it.
    /// </remarks>
    private struct ReadCancellation<TFront>(PipeReader input, ForwardingCancellation activity, TFront front, IClientResponseSink? client, bool lends) : IDisposable
        where TFront : IForwardingFront
    {
        private readonly CancellationToken token = activity.Token;
        private CancellationTokenRegistration _registration;
        private bool _registered;

        public void Register()
        {
            if (!_registered && token.CanBeCanceled)
            {
                _registered = true;
                // Already cancelled: the callback runs here and the read that waits returns IsCanceled at once.
                _registration = !lends
                    ? token.UnsafeRegister(static state => ((PipeReader)state!).CancelPendingRead(), input)
                    : token.UnsafeRegister(static state =>
                    {
                        var (reader, lender, client, cancellation) = ((PipeReader, TFront, IClientResponseSink?, ForwardingCancellation))state!;
                        reader.CancelPendingRead();
                        if (!cancellation.ShuttingDown)
                        {
                            RevokeLent(lender, client);
                        }
                    }, (input, front, client, activity));
            }
        }

        public readonly void Dispose() => _registration.Dispose();
    }

    private static ForwarderError ClassifyNativeHeadFailure(Exception exception, ForwardingCancellation cancellation, Task<StreamCopyResult>? requestPump)
    {
        if (requestPump is { IsCompletedSuccessfully: true, Result: StreamCopyResult.InputError })
        {
            return ForwarderError.RequestBodyClient;
        }

        if (cancellation.ClientAborted)
        {
            return ForwarderError.RequestCanceled;
        }

        if (cancellation.TimedOut)
        {
            return ForwarderError.RequestTimedOut;
        }

        return requestPump is { IsCompletedSuccessfully: true, Result: StreamCopyResult.OutputError }
            ? ForwarderError.RequestBodyDestination
            : ForwarderError.Request;
    }

    private static ForwarderError ClassifyNativeBodyFailure(StreamCopyResult result, ForwardingCancellation cancellation, Task<StreamCopyResult>? requestPump)
    {
        if (requestPump is { IsCompletedSuccessfully: true, Result: StreamCopyResult.InputError })
        {
            return ForwarderError.RequestBodyClient;
        }

        return result switch
        {
            _ when cancellation.ClientAborted => ForwarderError.ResponseBodyCanceled,
            _ when cancellation.TimedOut => ForwarderError.ResponseBodyTimedOut,
            StreamCopyResult.OutputError => ForwarderError.ResponseBodyClient,
            _ => ForwarderError.ResponseBodyDestination,
        };
    }

    private static async ValueTask StopRequestPumpAsync(Task<StreamCopyResult>? requestPump, PipeReader requestBody, ForwarderBackendCall call)
    {
        if (requestPump is null)
        {
            return;
        }

        if (!requestPump.IsCompleted)
        {
            // Wherever the pump waits (the client's next bytes, the backend's credit), it returns now.
            requestBody.CancelPendingRead();
            call.RequestBody.CancelPendingFlush();
        }

        try
        {
            await requestPump.ConfigureAwait(false);
        }
        catch (Exception)
        {
            // The outcome is already decided; the pump only has to stop.
        }
    }

    /// <summary>Headers already went out: reset the client's stream (RFC 9113 §8.1), abandon the backend's, stop the upload.</summary>
    private async ValueTask<ForwarderError> FailNativeAfterResponseStartedAsync<TFront>(TFront front, ForwarderBackendCall call, ForwarderError error,
        Exception? exception, ForwardingCancellation cancellation, Task<StreamCopyResult>? requestPump, PipeReader requestBody)
        where TFront : IForwardingFront
    {
        front.RecordError(error, exception, cancellation.ClientDeadlineExpired);
        Log.Outcome(logger, error, front.Proxy, front.StatusCode, exception, cancellation.ClientDeadlineExpired);
        call.Abort();
        var code = error is ForwarderError.ResponseBodyDestination or ForwarderError.RequestBodyDestination ? Http2InternalError : Http2Cancel;
        var done = front.Reset(code);
        Log.AbortingClient(logger, done, error);

        await StopRequestPumpAsync(requestPump, requestBody, call).ConfigureAwait(false);
        return error;
    }
}
