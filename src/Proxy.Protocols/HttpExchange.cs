using System.Buffers;
using Microsoft.Win32.SafeHandles;

namespace Proxy.Protocols;

/// <summary>
/// One request/response exchange as the protocol engines present it to the host. HTTP/2 streams
/// and HTTP/1.1 requests derive from it; Proxy.Server maps it onto ASP.NET Core features.
///
/// Threading: the app (one logical thread of control per request) calls the members; the
/// engine never blocks on them. Response writes go through <see cref="ResponseBody"/>, whose
/// FlushAsync applies backpressure (HTTP/2 flow control, socket backpressure).
/// </summary>
public abstract class HttpExchange
{
    // ---- Request: set by the engine before IHttpRequestHandler.HandleAsync ----

    /// <summary>"HTTP/2" or "HTTP/1.1" (ASP.NET Core's HttpProtocol strings).</summary>
    public string Protocol { get; protected set; } = "";
    public string Method { get; protected set; } = "";
    /// <summary>"http" or "https" (":scheme" for HTTP/2).</summary>
    public string Scheme { get; protected set; } = "";
    /// <summary>
    /// ":authority" for HTTP/2 (the Host header when there is none; when both came, Host was replaced by it), the
    /// absolute-form target's authority or else the Host header for HTTP/1.1.
    /// </summary>
    public string Authority { get; protected set; } = "";
    /// <summary>The request target as received: path and query ("/a/b?c=d"), or "*" for OPTIONS.</summary>
    public string RawTarget { get; protected set; } = "";
    /// <summary>Header fields, without pseudo-headers.</summary>
    public HttpHeaderList RequestHeaders { get; } = new();
    /// <summary>Declared content-length, when present and valid.</summary>
    public long? RequestContentLength { get; protected set; }
    /// <summary>True when the request can carry a body (HTTP/2: HEADERS did not end the stream; HTTP/1.1: content-length &gt; 0 or chunked).</summary>
    public bool RequestHasBody { get; protected set; }
    /// <summary>The request body. Completes at end of stream; faults if the client resets.</summary>
    public abstract PipeReader RequestBody { get; }
    /// <summary>Request trailers, available after the body completed (HTTP/2 only, else empty).</summary>
    public HttpHeaderList RequestTrailers { get; } = new();

    public required ConnectionMetadata Connection { get; init; }

    /// <summary>Fires when the client resets the stream, the connection drops, or the server aborts.</summary>
    public abstract CancellationToken RequestAborted { get; }

    // ---- Response: filled by the app ----

    public int StatusCode { get; set; } = 200;
    public string? ReasonPhrase { get; set; }
    public HttpHeaderList ResponseHeaders { get; } = new();
    /// <summary>Sent at completion (HTTP/2 trailing HEADERS; HTTP/1.1 chunked trailers when allowed).</summary>
    public HttpHeaderList ResponseTrailers { get; } = new();
    public abstract bool SupportsTrailers { get; }
    public abstract bool HasResponseStarted { get; }

    /// <summary>
    /// Commits status and headers (read-only after it) without waiting for body bytes. HTTP/2 schedules its HEADERS
    /// frame at once; HTTP/1.1 puts the head into the connection's output, and the next flush of
    /// <see cref="ResponseBody"/> or the completion sends it (as Kestrel: StartAsync commits, a flush sends). Called
    /// implicitly by the first write or flush of <see cref="ResponseBody"/>.
    /// </summary>
    public abstract ValueTask StartResponseAsync(CancellationToken cancellationToken = default);

    /// <summary>
    /// The response body. Writes are handed to the connection's writer loop on FlushAsync;
    /// the engine does not buffer the whole body.
    /// </summary>
    public abstract PipeWriter ResponseBody { get; }

    /// <summary>
    /// The largest size hint for <see cref="ResponseBody"/> that one pooled block still serves: a relay copying a bulk
    /// body asks for pieces of this size (past a pool's block size, a pipe rents from ArrayPool.Shared instead).
    /// </summary>
    public virtual int ResponseBodyBlockSize => 4096;

    /// <summary>True when <see cref="LendResponseBodyAsync"/> works (HTTP/2 streams of our server).</summary>
    public virtual bool CanLendResponseBody => false;

    /// <summary>
    /// Sends <paramref name="body"/> as response body straight from the caller's memory: the connection's writer frames it
    /// from there (one copy, into the connection's output) instead of from <see cref="ResponseBody"/>'s pipe, after what
    /// that pipe already holds. The result is true once every byte is in the connection's output, false when the stream
    /// stopped first (reset, closed, <see cref="RevokeLentResponseBody"/>). Either way nothing references the memory after
    /// the task completes, and not before: the caller keeps it valid and unchanged until then, and lends nothing else
    /// meanwhile.
    /// </summary>
    /// <remarks>
    /// A relay lends the bytes it read from a backend and consumes them when the task completes, so the backend's own
    /// buffer is the only copy the proxy holds. The task completes on the writer's thread's event loop after its batch,
    /// or on the thread pool; it waits for the peer's flow-control windows, so a caller that must give up calls
    /// <see cref="RevokeLentResponseBody"/> (or aborts the exchange), then still awaits it.
    /// </remarks>
    public virtual ValueTask<bool> LendResponseBodyAsync(ReadOnlySequence<byte> body)
        => throw new NotSupportedException("This exchange does not take lent response bodies (CanLendResponseBody is false).");

    /// <summary>Asks the writer to drop the lent body's unsent bytes: the pending <see cref="LendResponseBodyAsync"/> then completes with false.</summary>
    public virtual void RevokeLentResponseBody()
    {
    }

    /// <summary>
    /// Sends <paramref name="count"/> bytes of <paramref name="file"/> from <paramref name="offset"/> as response body,
    /// after the body bytes written before (the response starts if it has not). Returns when the bytes were handed
    /// to the engine, when the file turned out shorter (the body ends there, as ASP.NET's SendFileFallback does), or
    /// when the client is gone. Throws <see cref="OperationCanceledException"/> when <paramref name="cancellationToken"/>
    /// fires, and the read's exception when the file cannot be read. The caller keeps the handle and may close it
    /// once this returns.
    /// </summary>
    /// <remarks>
    /// This default reads the file straight into <see cref="ResponseBody"/>'s memory and flushes every 64 KiB (a TLS
    /// write's worth). NOTE: the reads are synchronous. On Linux an "async" file read is this same pread run on
    /// another pool thread, so reading here blocks no more threads and saves the hop and its allocations.
    /// HTTP/2 overrides it: the connection's writer loop reads the file into DATA frames itself.
    /// </remarks>
    public virtual async ValueTask SendFileAsync(SafeFileHandle file, long offset, long count, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(file);
        cancellationToken.ThrowIfCancellationRequested();
        if (!HasResponseStarted)
        {
            await StartResponseAsync(cancellationToken).ConfigureAwait(false);
        }
        var body = ResponseBody;
        var position = offset;
        var remaining = count;
        var unflushed = 0;
        while (remaining > 0)
        {
            var memory = body.GetMemory();
            var read = RandomAccess.Read(file, memory.Span[..(int)Math.Min(memory.Length, remaining)], position);
            if (read == 0)
            {
                break; // the file shrank: end here (the engine reports a short body)
            }
            body.Advance(read);
            position += read;
            remaining -= read;
            unflushed += read;
            if (unflushed >= SendFileFlushSize || remaining == 0)
            {
                unflushed = 0;
                var result = await body.FlushAsync(cancellationToken).ConfigureAwait(false);
                if (result.IsCanceled)
                {
                    throw new OperationCanceledException("The response flush was canceled.");
                }
                if (result.IsCompleted)
                {
                    return; // the client is gone
                }
            }
        }
        if (unflushed > 0)
        {
            await body.FlushAsync(cancellationToken).ConfigureAwait(false); // the file shrank after some reads
        }
    }

    /// <summary>Bytes the default <see cref="SendFileAsync"/> reads before each flush: a TLS write's worth.</summary>
    private const int SendFileFlushSize = 64 * 1024;

    /// <summary>Ends the response: flushes, sends trailers (if any) and END_STREAM / last chunk. Idempotent.</summary>
    public abstract ValueTask CompleteAsync();

    /// <summary>Aborts the exchange: RST_STREAM with <paramref name="errorCode"/> (HTTP/2) or closing the connection (HTTP/1.1).</summary>
    public abstract void Abort(uint errorCode);

    /// <summary>Free slot for the host to attach its per-request state (the ASP.NET feature collection).</summary>
    public object? HostState { get; set; }
}
