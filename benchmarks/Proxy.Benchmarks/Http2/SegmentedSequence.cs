namespace Proxy.Benchmarks.Http2;

/// <summary>Builds a multi-segment <see cref="ReadOnlySequence{T}"/>, as a pipe hands out after several reads.</summary>
internal static class SegmentedSequence
{
    public static ReadOnlySequence<byte> Create(byte[] bytes, int segmentSize)
    {
        if (segmentSize <= 0 || segmentSize >= bytes.Length)
        {
            return new ReadOnlySequence<byte>(bytes);
        }

        Segment first = new(bytes.AsMemory(0, segmentSize), 0);
        Segment last = first;
        for (int offset = segmentSize; offset < bytes.Length; offset += segmentSize)
        {
            int length = Math.Min(segmentSize, bytes.Length - offset);
            // A fresh array per segment, like separate pool buffers.
            last = last.Append(bytes.AsSpan(offset, length).ToArray());
        }
        return new ReadOnlySequence<byte>(first, 0, last, last.Memory.Length);
    }

    private sealed class Segment : ReadOnlySequenceSegment<byte>
    {
        public Segment(ReadOnlyMemory<byte> memory, long runningIndex)
        {
            Memory = memory;
            RunningIndex = runningIndex;
        }

        public Segment Append(ReadOnlyMemory<byte> memory)
        {
            var next = new Segment(memory, RunningIndex + Memory.Length);
            Next = next;
            return next;
        }
    }
}
