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
    public static void WriteInBlocks(this PipeWriter writer, ReadOnlySpan<byte> source)
    {
        while (!source.IsEmpty)
        {
            var destination = writer.GetSpan(1);
            var count = Math.Min(destination.Length, source.Length);
            source[..count].CopyTo(destination);
            writer.Advance(count);
            source = source[count..];
        }
    }
}
