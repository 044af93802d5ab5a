using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>TryReadFrame and the 9-octet frame header (RFC 9113 §4.1, §4.2).</summary>
public class Http2FrameReaderTests
{
    [Fact]
    public void TryReadFrame_WholeFrame_ParsesHeaderAndSlicesPayload()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.EndHeaders | Http2FrameFlags.EndStream, 0x01020305, 1, 2, 3);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(new Http2FrameHeader(3, Http2FrameType.Headers, Http2FrameFlags.EndHeaders | Http2FrameFlags.EndStream, 0x01020305), header);
        Assert.Equal(new byte[] { 1, 2, 3 }, payload.ToArray());
    }

    [Fact]
    public void TryReadFrame_EveryByteBoundary_ParsesTheSameFrame()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.EndStream, 7, 10, 11, 12, 13, 14);

        foreach (ReadOnlySequence<byte> sequence in FrameBytes.EverySplit(bytes))
        {
            var (header, payload) = FrameBytes.ReadOne(sequence);
            Assert.Equal(new Http2FrameHeader(5, Http2FrameType.Data, Http2FrameFlags.EndStream, 7), header);
            Assert.Equal(new byte[] { 10, 11, 12, 13, 14 }, payload.ToArray());
        }
    }

    [Fact]
    public void TryReadFrame_PartialInput_ReturnsFalseAndLeavesBufferIntact()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Ping, Http2FrameFlags.None, 0, 1, 2, 3, 4, 5, 6, 7, 8);

        for (int available = 0; available < bytes.Length; available++)
        {
            // Both the header-incomplete and the payload-incomplete cases, single and split segments.
            var buffers = new List<ReadOnlySequence<byte>> { new(bytes.AsMemory(0, available)) };
            if (available > 1)
            {
                buffers.Add(FrameBytes.Split(bytes[..available], available / 2));
            }

            foreach (ReadOnlySequence<byte> original in buffers)
            {
                ReadOnlySequence<byte> buffer = original;
                Assert.False(Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out _, out _));
                Assert.Equal(original.Length, buffer.Length);
                Assert.Equal(original.Start, buffer.Start);
                Assert.Equal(original.End, buffer.End);
            }
        }
    }

    [Fact]
    public void TryReadFrame_TwoFramesInOneBuffer_ReadsThemInOrder()
    {
        byte[] bytes = [
            .. FrameBytes.Raw(Http2FrameType.WindowUpdate, Http2FrameFlags.None, 1, 0, 0, 0, 9),
            .. FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.Ack, 0),
            0x00, // the first octet of a third, incomplete frame
        ];
        var buffer = FrameBytes.Split(bytes, 4, 15);

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var first, out var firstPayload));
        Assert.Equal(Http2FrameType.WindowUpdate, first.Type);
        Assert.Equal(9, Http2FrameReader.ReadWindowUpdate(first, firstPayload).WindowSizeIncrement);

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var second, out var secondPayload));
        Assert.Equal(new Http2FrameHeader(0, Http2FrameType.Settings, Http2FrameFlags.Ack, 0), second);
        Assert.True(secondPayload.IsEmpty);

        Assert.False(Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out _, out _));
        Assert.Equal(1, buffer.Length);
    }

    [Fact]
    public void FrameHeader_ReservedBitSet_IsIgnoredOnRead()
    {
        // RFC 9113 §4.1: the reserved bit "MUST be ignored when receiving".
        byte[] bytes = FrameBytes.RawWithLength(0, Http2FrameType.Continuation, Http2FrameFlags.EndHeaders, 0x8000_0003u, []);

        var (header, _) = FrameBytes.ReadOne(bytes);

        Assert.Equal(3, header.StreamId);
    }

    [Fact]
    public void FrameHeader_UnknownType_IsReturned()
    {
        // RFC 9113 §4.1 / §5.5: unknown types are read (and then discarded by the engine), not rejected.
        byte[] bytes = FrameBytes.Raw((Http2FrameType)0xFA, (Http2FrameFlags)0xFF, 0, 0xAA, 0xBB);
        ReadOnlySequence<byte> buffer = FrameBytes.Split(bytes, 3, 10);

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out var payload));

        Assert.Equal((Http2FrameType)0xFA, header.Type);
        Assert.Equal((Http2FrameFlags)0xFF, header.Flags);
        Assert.Equal(new byte[] { 0xAA, 0xBB }, payload.ToArray());
        Assert.True(buffer.IsEmpty);
    }

    [Fact]
    public void Frame_LengthAboveMaxFrameSize_FrameSizeError()
    {
        // RFC 9113 §4.2: only the header is needed to reject an oversized frame.
        byte[] bytes = FrameBytes.RawWithLength(Http2FrameReader.DefaultMaxFrameSize + 1, Http2FrameType.Data, Http2FrameFlags.None, 1, []);
        ReadOnlySequence<byte> buffer = FrameBytes.Single(bytes);

        var error = Assert.Throws<Http2ConnectionException>(
            () => Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out _, out _));

        Assert.Equal(Http2ErrorCode.FrameSizeError, error.ErrorCode);
        Assert.Equal("frame_too_large", error.Token);
    }

    [Fact]
    public void Frame_LengthAboveRaisedMaxFrameSize_FrameSizeError()
    {
        byte[] bytes = FrameBytes.RawWithLength(100_001, Http2FrameType.Headers, Http2FrameFlags.None, 1, []);
        ReadOnlySequence<byte> buffer = FrameBytes.Single(bytes);

        var error = Assert.Throws<Http2ConnectionException>(
            () => Http2FrameReader.TryReadFrame(ref buffer, 100_000, out _, out _));

        Assert.Equal(Http2ErrorCode.FrameSizeError, error.ErrorCode);
    }

    [Fact]
    public void TryReadFrame_DefaultMaxSizeFrame_IsRead()
    {
        byte[] data = Enumerable.Range(0, Http2FrameReader.DefaultMaxFrameSize).Select(i => (byte)i).ToArray();
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 1, data, endStream: false));

        var (header, payload) = FrameBytes.ReadOne(FrameBytes.Split(bytes, 5, 4096, 8192 + 3));

        Assert.Equal(Http2FrameReader.DefaultMaxFrameSize, header.Length);
        Assert.Equal(data, Http2FrameReader.ReadData(header, payload).Data.ToArray());
    }

    [Fact]
    public void TryReadFrame_LargestPossibleFrame_IsRead()
    {
        // 2^24-1 octets, the most the length field can say, accepted when that is our SETTINGS_MAX_FRAME_SIZE.
        var data = new byte[Http2FrameReader.MaxFramePayloadLength];
        data[0] = 0x11;
        data[^1] = 0x22;
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 3, data, endStream: true));
        Assert.Equal(new byte[] { 0xFF, 0xFF, 0xFF }, bytes[..3]);

        var (header, payload) = FrameBytes.ReadOne(bytes, Http2FrameReader.MaxFramePayloadLength);

        var frame = Http2FrameReader.ReadData(header, payload);
        Assert.Equal(Http2FrameReader.MaxFramePayloadLength, frame.Data.Length);
        Assert.Equal(0x11, frame.Data.FirstSpan[0]);
        Assert.Equal(0x22, frame.Data.Slice(frame.Data.Length - 1).FirstSpan[0]);
        Assert.True(frame.EndStream);
    }

    [Fact]
    public void TryReadFrameHeader_DoesNotConsumeOrCheckLength()
    {
        byte[] bytes = FrameBytes.RawWithLength(0xFFFFFF, Http2FrameType.Data, Http2FrameFlags.None, 9, []);

        Assert.True(Http2FrameReader.TryReadFrameHeader(FrameBytes.Split(bytes, 1, 2, 3, 4, 5, 6, 7, 8), out var header));

        Assert.Equal(new Http2FrameHeader(0xFFFFFF, Http2FrameType.Data, Http2FrameFlags.None, 9), header);
        Assert.False(Http2FrameReader.TryReadFrameHeader(FrameBytes.Single(bytes[..8]), out _));
    }

    [Fact]
    public void ClientPreface_IsTheRfcString()
    {
        Assert.Equal("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8.ToArray(), Http2FrameReader.ClientPreface.ToArray());
    }
}
