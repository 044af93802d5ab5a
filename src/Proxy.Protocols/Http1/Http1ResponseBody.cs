namespace Proxy.Protocols.Http1;

/// <summary>
/// The response body writer. It writes straight into the transport's output: the status line and
/// headers go first (on the first GetMemory/Write/Flush), and in chunked mode every Advance
/// becomes one chunk whose size prefix is written into room reserved in front of the app's bytes.
/// FlushAsync is a real transport flush, so an SSE event leaves as soon as the app flushes it.
/// </summary>
// Owned by the app that handles the exchange (one writer at a time, like any PipeWriter).
internal sealed class Http1ResponseBody : PipeWriter
{
    private readonly Http1Exchange _exchange;

    public Http1ResponseBody(Http1Exchange exchange) => _exchange = exchange;

    public override Memory<byte> GetMemory(int sizeHint = 0) => _exchange.GetBodyMemory(sizeHint);

    public override Span<byte> GetSpan(int sizeHint = 0) => _exchange.GetBodyMemory(sizeHint).Span;

    public override void Advance(int bytes) => _exchange.AdvanceBody(bytes);

    public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default) => _exchange.FlushBodyAsync(cancellationToken);

    public override void CancelPendingFlush() => _exchange.CancelPendingFlush();

    public override void Complete(Exception? exception = null)
    {
        if (exception is not null)
        {
            _exchange.Abort(0);
            return;
        }
        // Completing synchronously would block; the connection finishes the response when the handler returns.
        _ = _exchange.CompleteAsync().AsTask();
    }

    public override ValueTask CompleteAsync(Exception? exception = null)
    {
        if (exception is not null)
        {
            _exchange.Abort(0);
            return ValueTask.CompletedTask;
        }
        return _exchange.CompleteAsync();
    }

    public override bool CanGetUnflushedBytes => false;
}
