using System.Net;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// The backend request body: streams the client's body as it arrives, never buffering it. For
/// gRPC every write is flushed so each message reaches the backend at once (client streaming and
/// bidi calls depend on it). Over HTTP/2 HttpClient keeps sending this content after the response
/// headers arrived, so the forwarder awaits <see cref="Completion"/> at the end.
/// </summary>
// Owned by HttpClient's send path (SerializeToStreamAsync); the forwarder only reads Completion.
internal sealed class StreamingRequestContent : HttpContent
{
    private readonly Stream _source;
    private readonly bool _flushEveryWrite;
    private readonly ForwardingCancellation _activity;
    private readonly CancellationToken _cancellation;
    private readonly TaskCompletionSource<(StreamCopyResult Result, Exception? Error)> _completion =
        new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _started;

    public StreamingRequestContent(Stream source, bool flushEveryWrite, ForwardingCancellation activity, CancellationToken cancellation)
    {
        _source = source;
        _flushEveryWrite = flushEveryWrite;
        _activity = activity;
        _cancellation = cancellation;
    }

    public bool Started => Volatile.Read(ref _started) == 1;

    public Task<(StreamCopyResult Result, Exception? Error)> Completion => _completion.Task;

    protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
        SerializeToStreamAsync(stream, context, CancellationToken.None);

    protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken)
    {
        if (Interlocked.Exchange(ref _started, 1) == 1)
        {
            // A body can be sent once: HttpClient retries would replay a half-read stream.
            throw new InvalidOperationException("The request body was already sent; a forwarded request cannot be retried.");
        }

        using var linked = CancellationTokenSource.CreateLinkedTokenSource(_cancellation, cancellationToken);
        if (_flushEveryWrite)
        {
            // NOTE: HttpClient has held the HEADERS frame of a duplex request back until the body's
            // first flush (dotnet/runtime #96223); a gRPC bidi call whose client waits for the
            // server's headers before sending would then hang. .NET 10 no longer needs this (the
            // bidi test passes without it), but the flush is cheap insurance, as in Grpc.Net.Client.
            try
            {
                await stream.FlushAsync(linked.Token).ConfigureAwait(false);
            }
            catch (Exception ex)
            {
                var early = linked.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.OutputError;
                _completion.TrySetResult((early, ex));
                throw new IOException($"Forwarding the request body failed ({early}).", ex);
            }
        }

        var (result, error, _) = await StreamCopier.CopyAsync(_source, stream, _flushEveryWrite, _activity, linked.Token).ConfigureAwait(false);
        if (result == StreamCopyResult.Success)
        {
            try
            {
                // Without this a small unflushed tail could sit in HttpClient's buffer.
                await stream.FlushAsync(linked.Token).ConfigureAwait(false);
            }
            catch (Exception ex)
            {
                result = linked.IsCancellationRequested ? StreamCopyResult.Canceled : StreamCopyResult.OutputError;
                error = ex;
            }
        }

        _completion.TrySetResult((result, error));
        if (result != StreamCopyResult.Success)
        {
            // NOTE: we must fail, not return: returning would make HttpClient end the backend request
            // as if the body were complete (END_STREAM / last chunk) with a truncated body.
            throw new IOException($"Forwarding the request body failed ({result}).", error);
        }
    }

    protected override bool TryComputeLength(out long length)
    {
        // The length, when known, is copied as a Content-Length header; unknown lengths go chunked
        // (HTTP/1.1) or as DATA frames until END_STREAM (HTTP/2).
        length = -1;
        return false;
    }
}
