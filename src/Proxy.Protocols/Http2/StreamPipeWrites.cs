namespace Proxy.Protocols.Http2;

// Stateless.
/// <summary>Copies into a stream's pipe one pool block at a time.</summary>
internal static class StreamPipeWrites
{
    /// <summary>
    /// Appends <paramref name="source"/> to <paramref name="writer"/> without asking for more than the pipe's current
    /// block or a new minimum-size one.
    /// NOTE: <c>BuffersExtensions.Write</c> asks for the whole remainder at once (<c>GetSpan(remaining)</c>); past the
    /// pool's block size a pipe then rents from <see cref="ArrayPool{T}.Shared"/> instead, so a 16 KiB DATA frame into
    /// a pipe of 4 KiB blocks took a fresh array each time.
    /// </summary>
    /// <remarks>
    /// Each block is asked for with a size hint of what is left (at most <paramref name="blockSize"/>, the pool's
    /// largest), so a pipe whose pool has small blocks gives a small payload a small block.
    /// </remarks>
    public static void WriteInBlocks(this PipeWriter writer, ReadOnlySpan<byte> source, int blockSize)
    {
        while (!source.IsEmpty)
        {
            var destination = writer.GetSpan(Math.Min(source.Length, blockSize));
            var count = Math.Min(destination.Length, source.Length);
            source[..count].CopyTo(destination);
            writer.Advance(count);
            source = source[count..];
        }
    }
}
