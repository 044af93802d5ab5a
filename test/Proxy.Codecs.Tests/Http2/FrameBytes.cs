using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>Builds raw frame bytes and (multi-segment) sequences for the frame codec tests.</summary>
internal static class FrameBytes
{
    /// <summary>A frame assembled byte by byte, independent of Http2FrameWriter, so reader tests do not trust the writer.</summary>
    public static byte[] Raw(Http2FrameType type, Http2FrameFlags flags, int streamId, params byte[] payload)
        => RawWithLength(payload.Length, type, flags, (uint)streamId, payload);

    public static byte[] RawWithLength(int length, Http2FrameType type, Http2FrameFlags flags, uint streamIdField, byte[] payload)
    {
        var bytes = new byte[9 + payload.Length];
        bytes[0] = (byte)(length >> 16);
        bytes[1] = (byte)(length >> 8);
        bytes[2] = (byte)length;
        bytes[3] = (byte)type;
        bytes[4] = (byte)flags;
        bytes[5] = (byte)(streamIdField >> 24);
        bytes[6] = (byte)(streamIdField >> 16);
        bytes[7] = (byte)(streamIdField >> 8);
        bytes[8] = (byte)streamIdField;
        payload.CopyTo(bytes, 9);
        return bytes;
    }

    public static byte[] Write(Action<IBufferWriter<byte>> write)
    {
        var writer = new ArrayBufferWriter<byte>();
        write(writer);
        return writer.WrittenSpan.ToArray();
    }

    public static ReadOnlySequence<byte> Single(byte[] bytes) => new(bytes);

    /// <summary>A sequence whose segments end at each of <paramref name="cuts"/> (strictly increasing offsets).</summary>
    public static ReadOnlySequence<byte> Split(byte[] bytes, params int[] cuts)
    {
        var bounds = new List<int> { 0 };
        bounds.AddRange(cuts);
        bounds.Add(bytes.Length);
        Segment? first = null;
        Segment? last = null;
        for (int i = 0; i + 1 < bounds.Count; i++)
        {
            // Copy each piece into its own array so no segment can read past its end by accident.
            var piece = bytes.AsSpan(bounds[i], bounds[i + 1] - bounds[i]).ToArray();
            if (last is null)
            {
                first = last = new Segment(piece, 0);
            }
            else
            {
                last = last.Append(piece);
            }
        }

        return new ReadOnlySequence<byte>(first!, 0, last!, last!.Memory.Length);
    }

    /// <summary>The sequence split in two at every inner byte boundary, then one byte per segment.</summary>
    public static IEnumerable<ReadOnlySequence<byte>> EverySplit(byte[] bytes)
    {
        for (int cut = 1; cut < bytes.Length; cut++)
        {
            yield return Split(bytes, cut);
        }

        yield return Split(bytes, Enumerable.Range(1, Math.Max(0, bytes.Length - 1)).ToArray());
    }

    /// <summary>Reads exactly one frame and asserts the buffer holds nothing after it.</summary>
    public static (Http2FrameHeader Header, ReadOnlySequence<byte> Payload) ReadOne(ReadOnlySequence<byte> buffer, int maxFrameSize = Http2FrameReader.DefaultMaxFrameSize)
    {
        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, maxFrameSize, out var header, out var payload));
        Assert.Equal(0, buffer.Length);
        Assert.Equal(header.Length, payload.Length);
        return (header, payload);
    }

    public static (Http2FrameHeader Header, ReadOnlySequence<byte> Payload) ReadOne(byte[] bytes, int maxFrameSize = Http2FrameReader.DefaultMaxFrameSize)
        => ReadOne(Single(bytes), maxFrameSize);

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
