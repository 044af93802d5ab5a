namespace Proxy.Protocols.Http2;

// Stateless.
/// <summary>Copies into a stream's pipe (or any pipe of pooled blocks) one pool block at a time.</summary>
public static class StreamPipeWrites
{
    /// <summary>
    /// Appends <paramref name="source"/> to <paramref name="writer"/> without asking for more than the pipe's current
    /// block or a new minimum-size one.
    /// NOTE: <c>BuffersExtensions.Write</c> asks for every block with no size hint (checked on .NET 10), so a pipe gives
    /// it its minimum segment each time: a 16 KiB DATA frame into a stream pipe (256-byte minimum) would take 64 blocks.
    /// And a single <c>GetSpan(remaining)</c> past the pool's largest block makes a pipe rent from
    /// <see cref="ArrayPool{T}.Shared"/> instead.
    /// </summary>
    /// <remarks>
    /// Each block is asked for with a size hint of what is left, so a pipe whose pool has small blocks gives a small
    /// payload a small block. A whole <paramref name="blockSize"/> (the pool's largest) is asked for only while that
    /// much is left; below it, at most <see cref="MidBlockSize"/>: a pool of 256-byte, 1, 4 and 16 KiB blocks then holds a
    /// 5 KiB message in two 4 KiB blocks, not in one of 16 KiB, and a 16 KiB DATA frame in one block, not four.
    /// </remarks>
    public static void WriteInBlocks(this PipeWriter writer, ReadOnlySpan<byte> source, int blockSize)
    {
        while (!source.IsEmpty)
        {
            var hint = source.Length >= blockSize ? blockSize : Math.Min(source.Length, MidBlockSize);
            var destination = writer.GetSpan(hint);
            var count = Math.Min(destination.Length, source.Length);
            source[..count].CopyTo(destination);
            writer.Advance(count);
            source = source[count..];
        }
    }

    /// <summary>The middle block of the stream pools (4 KiB): what a write of less than a whole large block asks for at most.</summary>
    public const int MidBlockSize = 4096;
}
