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
    // Past this the pre-start buffer is dropped rather than kept for the connection's next request.
    private const int MaxKeptBufferSize = 64 * 1024;

    private ArrayBufferWriter<byte>? _preStart;
    private ArrayBufferWriter<byte>? _spareBuffer;
    private bool _completed;

    private PipeWriter Inner => owner.Exchange.ResponseBody;

    /// <summary>Bytes written before the response started and not yet handed to the exchange.</summary>
    internal int BufferedLength => _preStart?.WrittenCount ?? 0;

    public override Memory<byte> GetMemory(int sizeHint = 0)
    {
        ThrowIfCompleted();
        return UseBuffer() ? PreStartBuffer(sizeHint).GetMemory(sizeHint) : Inner.GetMemory(sizeHint);
    }

    public override Span<byte> GetSpan(int sizeHint = 0)
    {
        ThrowIfCompleted();
        return UseBuffer() ? PreStartBuffer(sizeHint).GetSpan(sizeHint) : Inner.GetSpan(sizeHint);
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
            Keep(buffer);
        }
    }

    /// <summary>Drops bytes held before the start (an error page replaces them).</summary>
    internal void DiscardBufferedBytes()
    {
        if (_preStart is { } buffer)
        {
            _preStart = null;
            Keep(buffer);
        }
    }

    /// <summary>Readies the writer for the next request on an HTTP/1.1 connection.</summary>
    internal void Reset()
    {
        DiscardBufferedBytes();
        _completed = false;
    }

    private ArrayBufferWriter<byte> PreStartBuffer(int sizeHint)
    {
        if (_preStart is null)
        {
            _preStart = _spareBuffer ?? new ArrayBufferWriter<byte>(Math.Max(sizeHint, 4096));
            _spareBuffer = null;
        }
        return _preStart;
    }

    private void Keep(ArrayBufferWriter<byte> buffer)
    {
        if (buffer.Capacity <= MaxKeptBufferSize)
        {
            buffer.ResetWrittenCount();
            _spareBuffer = buffer;
        }
    }

    private bool UseBuffer() => !owner.HasStarted;

    internal void ThrowIfCompleted()
    {
        if (_completed)
        {
            throw new InvalidOperationException("Writing is not allowed after the response body was completed.");
        }
    }
}
