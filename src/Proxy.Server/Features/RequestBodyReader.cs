using System.Runtime.CompilerServices;

namespace Proxy.Server.Features;

// Owned by the app's request thread of control (one reader at a time, as PipeReader requires).
/// <summary>
/// The request body as the app sees it: the exchange's reader, plus the
/// IHttpMaxRequestBodySizeFeature limit (413) and knowledge of when the body ended (for trailers).
/// </summary>
internal sealed class RequestBodyReader(HttpExchange exchange) : PipeReader
{
    private PipeReader Inner => exchange.RequestBody;
    private ReadOnlySequence<byte> _lastBuffer;
    private long _consumed;

    public long? MaxBodySize { get; set; }

    /// <summary>True once the app started reading (the limit is then read-only).</summary>
    public bool HasStartedReading { get; private set; }

    /// <summary>True once the app has seen the end of the body.</summary>
    public bool IsBodyCompleted { get; private set; }

    /// <summary>Readies the reader for a request (a new one, or the exchange's next).</summary>
    public void Reset(long? maxBodySize)
    {
        MaxBodySize = maxBodySize;
        HasStartedReading = false;
        IsBodyCompleted = false;
        _lastBuffer = default;
        _consumed = 0;
    }

    // NOTE: not an async method: a read the exchange completes at once (a small body already received) returns without a
    // state machine; only a read that waits goes through ReadPendingAsync. What throws here (the 413 included) is in the
    // returned task, as it was.
    public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        try
        {
            OnReading();
            var read = Inner.ReadAsync(cancellationToken);
            return read.IsCompletedSuccessfully ? new ValueTask<ReadResult>(Observe(read.Result)) : ReadPendingAsync(read);
        }
        catch (Exception ex)
        {
            return ValueTask.FromException<ReadResult>(ex);
        }
    }

    [AsyncMethodBuilder(typeof(PoolingAsyncValueTaskMethodBuilder<>))]
    private async ValueTask<ReadResult> ReadPendingAsync(ValueTask<ReadResult> read) => Observe(await read.ConfigureAwait(false));

    public override bool TryRead(out ReadResult result)
    {
        OnReading();
        if (!Inner.TryRead(out result))
        {
            return false;
        }
        result = Observe(result);
        return true;
    }

    public override void AdvanceTo(SequencePosition consumed) => AdvanceTo(consumed, consumed);

    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined)
    {
        _consumed += _lastBuffer.Slice(0, consumed).Length;
        _lastBuffer = default;
        Inner.AdvanceTo(consumed, examined);
    }

    public override void CancelPendingRead() => Inner.CancelPendingRead();

    public override void Complete(Exception? exception = null) => Inner.Complete(exception);

    private void OnReading()
    {
        HasStartedReading = true;
        // Fail before reading anything when the declared length is already too big.
        if (MaxBodySize is { } max && exchange.RequestContentLength > max)
        {
            throw TooLarge(max);
        }
    }

    private ReadResult Observe(ReadResult result)
    {
        _lastBuffer = result.Buffer;
        if (MaxBodySize is { } max && _consumed + result.Buffer.Length > max)
        {
            Inner.AdvanceTo(result.Buffer.Start);
            _lastBuffer = default;
            throw TooLarge(max);
        }
        if (result.IsCompleted)
        {
            IsBodyCompleted = true;
        }
        return result;
    }

    private static BadHttpRequestException TooLarge(long max)
        => new($"Request body too large. The limit is {max} bytes.", StatusCodes.Status413PayloadTooLarge);
}
