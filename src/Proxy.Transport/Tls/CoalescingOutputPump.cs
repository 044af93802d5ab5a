namespace Proxy.Transport.Tls;

// Owned by its loop: the only reader of the output pipe and the only writer of the stream.
/// <summary>
/// Moves bytes from a pipe to a stream in large writes. Everything pending in the pipe is
/// written in contiguous chunks of up to <c>maxWriteSize</c>, copying segments together when
/// the pipe holds them apart.
/// NOTE: this is the fix for Kestrel's known weakness (aspnetcore #30545, runtime #49000): a
/// pipe hands out 4 KiB segments, and writing each to SslStream costs a TLS record, a MAC and a
/// syscall per 4 KiB. One 64 KiB write lets SslStream emit full 16 KiB records.
/// </summary>
internal static class CoalescingOutputPump
{
    public static async Task RunAsync(PipeReader reader, Stream stream, int maxWriteSize)
    {
        byte[]? scratch = null;
        Exception? error = null;
        try
        {
            while (true)
            {
                var result = await reader.ReadAsync().ConfigureAwait(false);
                var buffer = result.Buffer;
                var remaining = buffer;
                while (!remaining.IsEmpty)
                {
                    var chunkLength = (int)Math.Min(remaining.Length, maxWriteSize);
                    var first = remaining.First;
                    if (first.Length >= chunkLength)
                    {
                        // Already contiguous: no copy.
                        await stream.WriteAsync(first[..chunkLength]).ConfigureAwait(false);
                    }
                    else
                    {
                        scratch ??= ArrayPool<byte>.Shared.Rent(maxWriteSize);
                        remaining.Slice(0, chunkLength).CopyTo(scratch);
                        await stream.WriteAsync(scratch.AsMemory(0, chunkLength)).ConfigureAwait(false);
                    }
                    remaining = remaining.Slice(chunkLength);
                }
                reader.AdvanceTo(buffer.End);

                if (!buffer.IsEmpty)
                {
                    // One flush per batch, when the pipe has drained what it had.
                    await stream.FlushAsync().ConfigureAwait(false);
                }
                if (result.IsCompleted || result.IsCanceled)
                {
                    break;
                }
            }
        }
        catch (Exception e)
        {
            error = e;
        }
        finally
        {
            reader.Complete(error);
            if (scratch is not null)
            {
                ArrayPool<byte>.Shared.Return(scratch);
            }
        }
    }
}
