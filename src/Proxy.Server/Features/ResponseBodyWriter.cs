namespace Proxy.Server.Features;

// Owned by the app's request thread of control (PipeWriter is single-writer).
/// <summary>
/// The response body the app writes to. Before the response starts, bytes are held here, so
/// OnStarting callbacks run and headers are copied to the exchange before any body byte reaches
/// the engine; the first flush (or write, or completion) starts the response and moves them.
/// After that, calls go straight to the exchange's writer.
/// </summary>
internal sealed class ResponseBodyWriter(RequestFeatures owner) : PipeWriter
{
    private ArrayBufferWriter<byte>? _preStart;
    private bool _completed;

    private PipeWriter Inner => owner.Exchange.ResponseBody;

    /// <summary>Bytes written before the response started and not yet handed to the exchange.</summary>
    internal int BufferedLength => _preStart?.WrittenCount ?? 0;

    public override Memory<byte> GetMemory(int sizeHint = 0)
    {
        ThrowIfCompleted();
        return UseBuffer() ? (_preStart ??= new ArrayBufferWriter<byte>(Math.Max(sizeHint, 4096))).GetMemory(sizeHint) : Inner.GetMemory(sizeHint);
    }

    public override Span<byte> GetSpan(int sizeHint = 0)
    {
        ThrowIfCompleted();
        return UseBuffer() ? (_preStart ??= new ArrayBufferWriter<byte>(Math.Max(sizeHint, 4096))).GetSpan(sizeHint) : Inner.GetSpan(sizeHint);
    }

    public override void Advance(int bytes)
    {
        ThrowIfCompleted();
        if (_preStart is not null)
        {
            _preStart.Advance(bytes);
        }
        else
        {
            Inner.Advance(bytes);
        }
    }

    public override async ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default)
    {
        await owner.StartResponseAsync(cancellationToken).ConfigureAwait(false);
        return await Inner.FlushAsync(cancellationToken).ConfigureAwait(false);
    }

    public override async ValueTask<FlushResult> WriteAsync(ReadOnlyMemory<byte> source, CancellationToken cancellationToken = default)
    {
        ThrowIfCompleted();
        await owner.StartResponseAsync(cancellationToken).ConfigureAwait(false);
        return await Inner.WriteAsync(source, cancellationToken).ConfigureAwait(false);
    }

    public override void CancelPendingFlush() => Inner.CancelPendingFlush();

    /// <summary>Marks the body done; the response itself completes when the app returns (this call cannot await).</summary>
    public override void Complete(Exception? exception = null) => _completed = true;

    public override async ValueTask CompleteAsync(Exception? exception = null)
    {
        _completed = true;
        await owner.CompleteResponseAsync().ConfigureAwait(false);
    }

    /// <summary>Called by the owner once the response started: hands the held bytes to the exchange.</summary>
    internal void MoveBufferedBytes()
    {
        if (_preStart is { } buffer)
        {
            _preStart = null;
            if (buffer.WrittenCount > 0)
            {
                Inner.Write(buffer.WrittenSpan);
            }
        }
    }

    /// <summary>Drops bytes held before the start (an error page replaces them).</summary>
    internal void DiscardBufferedBytes() => _preStart = null;

    private bool UseBuffer() => !owner.HasStarted;

    private void ThrowIfCompleted()
    {
        if (_completed)
        {
            throw new InvalidOperationException("Writing is not allowed after the response body was completed.");
        }
    }
}
