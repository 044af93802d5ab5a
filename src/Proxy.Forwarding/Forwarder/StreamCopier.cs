using System.Buffers;

namespace Proxy.Forwarding.Forwarder;

internal enum StreamCopyResult
{
    Success,
    InputError,
    OutputError,
    Canceled,
}

/// <summary>
/// Copies a body from one stream to another with a pooled 64 KiB buffer (YARP's size). Before each
/// read that may wait, it gives the buffer back and does a zero-byte read, so an idle SSE or gRPC
/// stream holds no buffer while it waits for its next event.
/// </summary>
internal static class StreamCopier
{
    public const int BufferSize = 64 * 1024;

    // flushEveryWrite: flush after every write so each SSE event or gRPC message leaves at once
    // instead of waiting for a buffer to fill.
    public static async ValueTask<(StreamCopyResult Result, Exception? Error, long Bytes)> CopyAsync(
        Stream input, Stream output, bool flushEveryWrite, ForwardingCancellation activity, CancellationToken cancellationToken)
    {
        byte[]? buffer = null;
        long total = 0;
        var read = 0;
        try
        {
            while (true)
            {
                if (buffer is null || read < buffer.Length)
                {
                    // The last read did not fill the buffer: the input is probably idle. Wait for
                    // data without holding memory.
                    if (buffer is not null)
                    {
                        ArrayPool<byte>.Shared.Return(buffer);
                        buffer = null;
                    }

                    try
                    {
                        await input.ReadAsync(Memory<byte>.Empty, cancellationToken).ConfigureAwait(false);
                    }
                    catch (Exception ex)
                    {
                        return (Classify(cancellationToken, StreamCopyResult.InputError), ex, total);
                    }

                    buffer = ArrayPool<byte>.Shared.Rent(BufferSize);
                }

                try
                {
                    read = await input.ReadAsync(buffer, cancellationToken).ConfigureAwait(false);
                }
                catch (Exception ex)
                {
                    return (Classify(cancellationToken, StreamCopyResult.InputError), ex, total);
                }

                activity.ResetActivity();
                if (read == 0)
                {
                    return (StreamCopyResult.Success, null, total);
                }

                try
                {
                    await output.WriteAsync(buffer.AsMemory(0, read), cancellationToken).ConfigureAwait(false);
                    if (flushEveryWrite)
                    {
                        await output.FlushAsync(cancellationToken).ConfigureAwait(false);
                    }
                }
                catch (Exception ex)
                {
                    return (Classify(cancellationToken, StreamCopyResult.OutputError), ex, total);
                }

                total += read;
                activity.ResetActivity();
            }
        }
        finally
        {
            if (buffer is not null)
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }
    }

    private static StreamCopyResult Classify(CancellationToken token, StreamCopyResult otherwise) =>
        token.IsCancellationRequested ? StreamCopyResult.Canceled : otherwise;
}
