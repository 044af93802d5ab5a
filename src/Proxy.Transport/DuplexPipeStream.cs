using System.Runtime.CompilerServices;

namespace Proxy.Transport;

/// <summary>
/// A <see cref="Stream"/> over an <see cref="IDuplexPipe"/>, so stream-based layers (SslStream)
/// can sit on a pipe transport. Reads and writes are async only: sync calls would block a
/// thread on the network. Owned by the single layer above it (one reader, one writer).
/// </summary>
public sealed class DuplexPipeStream(PipeReader input, PipeWriter output) : Stream
{
    private bool _disposed;

    public DuplexPipeStream(IDuplexPipe pipe) : this(pipe.Input, pipe.Output)
    {
    }

    public override bool CanRead => true;
    public override bool CanSeek => false;
    public override bool CanWrite => true;
    public override long Length => throw new NotSupportedException();
    public override long Position { get => throw new NotSupportedException(); set => throw new NotSupportedException(); }

    [AsyncMethodBuilder(typeof(PoolingAsyncValueTaskMethodBuilder<>))]
    public override async ValueTask<int> ReadAsync(Memory<byte> destination, CancellationToken cancellationToken = default)
    {
        while (true)
        {
            var result = await input.ReadAsync(cancellationToken).ConfigureAwait(false);
            var buffer = result.Buffer;
            if (!buffer.IsEmpty)
            {
                var count = (int)Math.Min(buffer.Length, destination.Length);
                buffer.Slice(0, count).CopyTo(destination.Span);
                input.AdvanceTo(buffer.GetPosition(count));
                return count;
            }
            input.AdvanceTo(buffer.End);
            if (result.IsCompleted || result.IsCanceled)
            {
                return 0;
            }
            if (destination.Length == 0)
            {
                return 0;
            }
        }
    }

    public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        => ReadAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

    public override async ValueTask WriteAsync(ReadOnlyMemory<byte> source, CancellationToken cancellationToken = default)
    {
        var result = await output.WriteAsync(source, cancellationToken).ConfigureAwait(false);
        if (result.IsCanceled)
        {
            throw new OperationCanceledException("The transport write was canceled.");
        }
    }

    public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        => WriteAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

    public override async Task FlushAsync(CancellationToken cancellationToken)
        => await output.FlushAsync(cancellationToken).ConfigureAwait(false);

    public override void Flush()
    {
        // NOTE: WriteAsync already flushes the pipe; nothing is left to push synchronously.
    }

    public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException("Synchronous reads are not supported.");
    public override void Write(byte[] buffer, int offset, int count) => throw new NotSupportedException("Synchronous writes are not supported.");
    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();
    public override void SetLength(long value) => throw new NotSupportedException();

    protected override void Dispose(bool disposing)
    {
        if (disposing && !_disposed)
        {
            _disposed = true;
            input.Complete();
            output.Complete();
        }
        base.Dispose(disposing);
    }

    public override ValueTask DisposeAsync()
    {
        Dispose(true);
        GC.SuppressFinalize(this);
        return default;
    }
}
