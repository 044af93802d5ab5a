using System.Buffers;

namespace Proxy.Testing;

/// <summary>Builds multi-segment <see cref="ReadOnlySequence{T}"/>s so parsers are tested across segment boundaries.</summary>
public static class TestSequence
{
    public static ReadOnlySequence<byte> Create(params byte[][] segments)
    {
        if (segments.Length == 0)
        {
            return ReadOnlySequence<byte>.Empty;
        }
        var first = new Segment(segments[0], 0);
        var last = first;
        for (var i = 1; i < segments.Length; i++)
        {
            last = last.Append(segments[i]);
        }
        return new ReadOnlySequence<byte>(first, 0, last, last.Memory.Length);
    }

    /// <summary>Splits <paramref name="data"/> into two segments at <paramref name="at"/>.</summary>
    public static ReadOnlySequence<byte> Split(byte[] data, int at) => Create(data[..at], data[at..]);

    // Owned by the sequence under construction; immutable once built.
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
