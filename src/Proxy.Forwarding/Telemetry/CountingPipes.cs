using System.Buffers;
using System.IO.Pipelines;

namespace Proxy.Forwarding.Telemetry;

/// <summary>Bytes of one request's bodies as the forwarder read and wrote them (the access log's in= and out=).</summary>
// Owned by one request: the request side only writes In, the response side only Out; read once the request is done.
internal sealed class BodyByteCounts
{
    public long In;
    public long Out;
}

/// <summary>A request body reader that counts the bytes its reader consumed into <see cref="BodyByteCounts.In"/>.</summary>
// Owned by the body's one reader, as any PipeReader.
internal sealed class CountingPipeReader(PipeReader inner, BodyByteCounts counts) : PipeReader
{
    private ReadOnlySequence<byte> _last;

    public override async ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        var result = await inner.ReadAsync(cancellationToken).ConfigureAwait(false);
        _last = result.Buffer;
        return result;
    }

    public override bool TryRead(out ReadResult result)
    {
        var read = inner.TryRead(out result);
        _last = read ? result.Buffer : default;
        return read;
    }

    public override void AdvanceTo(SequencePosition consumed) => AdvanceTo(consumed, consumed);

    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined)
    {
        counts.In += _last.Slice(0, consumed).Length; // consumed is a position in the buffer last handed out
        _last = default;
        inner.AdvanceTo(consumed, examined);
    }

    public override void CancelPendingRead() => inner.CancelPendingRead();

    public override void Complete(Exception? exception = null) => inner.Complete(exception);

    public override ValueTask CompleteAsync(Exception? exception = null) => inner.CompleteAsync(exception);
}

/// <summary>A response body writer that counts the bytes written through it into <see cref="BodyByteCounts.Out"/>.</summary>
// Owned by the body's one writer, as any PipeWriter.
internal sealed class CountingPipeWriter(PipeWriter inner, BodyByteCounts counts) : PipeWriter
{
    public override bool CanGetUnflushedBytes => inner.CanGetUnflushedBytes;

    public override long UnflushedBytes => inner.UnflushedBytes;

    public override void Advance(int bytes)
    {
        counts.Out += bytes;
        inner.Advance(bytes);
    }

    public override Memory<byte> GetMemory(int sizeHint = 0) => inner.GetMemory(sizeHint);

    public override Span<byte> GetSpan(int sizeHint = 0) => inner.GetSpan(sizeHint);

    public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default) => inner.FlushAsync(cancellationToken);

    public override ValueTask<FlushResult> WriteAsync(ReadOnlyMemory<byte> source, CancellationToken cancellationToken = default)
    {
        counts.Out += source.Length;
        return inner.WriteAsync(source, cancellationToken);
    }

    public override void CancelPendingFlush() => inner.CancelPendingFlush();

    public override void Complete(Exception? exception = null) => inner.Complete(exception);

    public override ValueTask CompleteAsync(Exception? exception = null) => inner.CompleteAsync(exception);
}
