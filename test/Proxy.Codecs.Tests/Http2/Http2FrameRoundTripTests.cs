using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>Every frame type written by Http2FrameWriter and read back by Http2FrameReader, whole and fragmented.</summary>
public class Http2FrameRoundTripTests
{
    private static readonly byte[] Block = [0x82, 0x86, 0x84, 0x41, 0x8a, 0x08, 0x9d, 0x5c, 0x0b, 0x81, 0x70, 0xdc];

    /// <summary>Reads the single frame in <paramref name="bytes"/> whole and split at every byte boundary.</summary>
    private static void ForEachSplit(byte[] bytes, Action<Http2FrameHeader, ReadOnlySequence<byte>> check)
    {
        var (header, payload) = FrameBytes.ReadOne(bytes);
        check(header, payload);
        foreach (ReadOnlySequence<byte> sequence in FrameBytes.EverySplit(bytes))
        {
            (header, payload) = FrameBytes.ReadOne(sequence);
            check(header, payload);
        }
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void DATA_RoundTrip_FromSpan(bool endStream)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 5, "hello"u8, endStream));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(5, Http2FrameType.Data, endStream ? Http2FrameFlags.EndStream : Http2FrameFlags.None, 5), header);
            var frame = Http2FrameReader.ReadData(header, payload);
            Assert.Equal("hello"u8.ToArray(), frame.Data.ToArray());
            Assert.Equal(endStream, frame.EndStream);
            Assert.Equal(5, frame.FlowControlledLength);
        });
    }

    [Fact]
    public void DATA_RoundTrip_FromMultiSegmentSequence()
    {
        byte[] data = Enumerable.Range(0, 300).Select(i => (byte)(i * 7)).ToArray();
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 9, FrameBytes.Split(data, 1, 100, 299), endStream: true));

        var (header, payload) = FrameBytes.ReadOne(bytes);
        var frame = Http2FrameReader.ReadData(header, payload);

        Assert.Equal(9, header.StreamId);
        Assert.Equal(data, frame.Data.ToArray());
        Assert.True(frame.EndStream);
    }

    [Fact]
    public void DATA_Empty_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 1, ReadOnlySpan<byte>.Empty, endStream: true));

        var (header, payload) = FrameBytes.ReadOne(bytes);
        var frame = Http2FrameReader.ReadData(header, payload);

        Assert.Equal(9, bytes.Length);
        Assert.True(frame.Data.IsEmpty);
        Assert.True(frame.EndStream);
        Assert.Equal(0, frame.FlowControlledLength);
    }

    [Fact]
    public void DATA_Padded_DataExcludesPaddingAndFlowControlCountsAll()
    {
        // Pad Length 3, data "abc", 3 octets of padding: 7 octets of payload, all flow-controlled (RFC 9113 §6.1).
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1, 3, (byte)'a', (byte)'b', (byte)'c', 0, 0, 0);

        ForEachSplit(bytes, (header, payload) =>
        {
            var frame = Http2FrameReader.ReadData(header, payload);
            Assert.Equal("abc"u8.ToArray(), frame.Data.ToArray());
            Assert.Equal(7, frame.FlowControlledLength);
        });
    }

    [Fact]
    public void DATA_PaddedWithNoData_IsAccepted()
    {
        // Pad Length = payload length - 1 leaves zero data octets: legal.
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1, 2, 0, 0);

        var (header, payload) = FrameBytes.ReadOne(bytes);
        var frame = Http2FrameReader.ReadData(header, payload);

        Assert.True(frame.Data.IsEmpty);
        Assert.Equal(3, frame.FlowControlledLength);
    }

    [Theory]
    [InlineData(false, false)]
    [InlineData(true, false)]
    [InlineData(false, true)]
    [InlineData(true, true)]
    public void HEADERS_RoundTrip(bool endStream, bool endHeaders)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteHeaders(w, 3, Block, endStream, endHeaders));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(Http2FrameType.Headers, header.Type);
            Assert.Equal(3, header.StreamId);
            var frame = Http2FrameReader.ReadHeaders(header, payload);
            Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
            Assert.Equal(endStream, frame.EndStream);
            Assert.Equal(endHeaders, frame.EndHeaders);
            Assert.False(frame.HasPriority);
        });
    }

    [Fact]
    public void HEADERS_PaddedWithPriority_ExposesPriorityAndFragment()
    {
        byte[] payloadBytes = [2, 0x80, 0, 0, 1, 15, .. Block, 0, 0];
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Padded | Http2FrameFlags.Priority | Http2FrameFlags.EndHeaders, 3, payloadBytes);

        ForEachSplit(bytes, (header, payload) =>
        {
            var frame = Http2FrameReader.ReadHeaders(header, payload);
            Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
            Assert.True(frame.HasPriority);
            Assert.True(frame.Exclusive);
            Assert.Equal(1, frame.StreamDependency);
            Assert.Equal(15, frame.Weight);
            Assert.True(frame.EndHeaders);
            Assert.False(frame.EndStream);
        });
    }

    [Fact]
    public void HEADERS_PriorityOnItself_IsExposedForTheEngine()
    {
        // RFC 9113 §5.3.1 makes this a stream error, but the field block must still be decoded, so the reader
        // returns it and the engine resets the stream.
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Priority | Http2FrameFlags.EndHeaders, 5, [0, 0, 0, 5, 16, .. Block]);

        var (header, payload) = FrameBytes.ReadOne(bytes);
        var frame = Http2FrameReader.ReadHeaders(header, payload);

        Assert.True(frame.HasPriority);
        Assert.Equal(header.StreamId, frame.StreamDependency);
        Assert.True(Http2FrameReader.DependsOnItself(header, frame));
        Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
    }

    [Fact]
    public void HEADERS_PriorityOnOtherStream_IsNotSelfDependent()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Priority | Http2FrameFlags.EndHeaders, 5, [0, 0, 0, 3, 16, .. Block]);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.False(Http2FrameReader.DependsOnItself(header, Http2FrameReader.ReadHeaders(header, payload)));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void CONTINUATION_RoundTrip(bool endHeaders)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteContinuation(w, 11, Block, endHeaders));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(Block.Length, Http2FrameType.Continuation, endHeaders ? Http2FrameFlags.EndHeaders : Http2FrameFlags.None, 11), header);
            var frame = Http2FrameReader.ReadContinuation(header, payload);
            Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
            Assert.Equal(endHeaders, frame.EndHeaders);
        });
    }

    [Fact]
    public void PRIORITY_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WritePriority(w, 7, 0x7FFF_FFFF, exclusive: true, 255));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(5, Http2FrameType.Priority, Http2FrameFlags.None, 7), header);
            Assert.Equal(new PriorityFrame(0x7FFF_FFFF, true, 255), Http2FrameReader.ReadPriority(header, payload));
        });
    }

    [Fact]
    public void PRIORITY_NotExclusive_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WritePriority(w, 7, 3, exclusive: false, 0));

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(new PriorityFrame(3, false, 0), Http2FrameReader.ReadPriority(header, payload));
    }

    [Fact]
    public void RST_STREAM_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteRstStream(w, 13, Http2ErrorCode.Cancel));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(4, Http2FrameType.RstStream, Http2FrameFlags.None, 13), header);
            Assert.Equal(Http2ErrorCode.Cancel, Http2FrameReader.ReadRstStream(header, payload).ErrorCode);
        });
    }

    [Fact]
    public void RST_STREAM_UnknownErrorCode_IsReturnedAsIs()
    {
        // RFC 9113 §7: unknown codes "MUST NOT trigger any special behavior"; the reader just passes them on.
        byte[] bytes = FrameBytes.Raw(Http2FrameType.RstStream, Http2FrameFlags.None, 1, 0xDE, 0xAD, 0xBE, 0xEF);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal((Http2ErrorCode)0xDEADBEEF, Http2FrameReader.ReadRstStream(header, payload).ErrorCode);
    }

    [Fact]
    public void SETTINGS_RoundTrip()
    {
        Http2Setting[] settings =
        [
            new(Http2SettingsParameter.HeaderTableSize, 0),
            new(Http2SettingsParameter.EnablePush, 0),
            new(Http2SettingsParameter.MaxConcurrentStreams, 100),
            new(Http2SettingsParameter.InitialWindowSize, int.MaxValue),
            new(Http2SettingsParameter.MaxFrameSize, 16_777_215),
            new(Http2SettingsParameter.MaxHeaderListSize, uint.MaxValue),
            new(Http2SettingsParameter.EnableConnectProtocol, 1),
            new((Http2SettingsParameter)0xABCD, 42), // unknown: kept for the engine to ignore (RFC 9113 §6.5.2)
        ];
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteSettings(w, settings));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(48, Http2FrameType.Settings, Http2FrameFlags.None, 0), header);
            int count = Http2FrameReader.ReadSettings(header, payload);
            Assert.Equal(settings.Length, count);
            for (int i = 0; i < count; i++)
            {
                Assert.Equal(settings[i], Http2FrameReader.ReadSetting(payload, i));
            }
        });
    }

    [Fact]
    public void SETTINGS_Empty_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteSettings(w, ReadOnlySpan<Http2Setting>.Empty));

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(new Http2FrameHeader(0, Http2FrameType.Settings, Http2FrameFlags.None, 0), header);
        Assert.Equal(0, Http2FrameReader.ReadSettings(header, payload));
    }

    [Fact]
    public void SETTINGS_Ack_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(Http2FrameWriter.WriteSettingsAck);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(new Http2FrameHeader(0, Http2FrameType.Settings, Http2FrameFlags.Ack, 0), header);
        Assert.Equal(0, Http2FrameReader.ReadSettings(header, payload));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void PUSH_PROMISE_RoundTrip(bool endHeaders)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WritePushPromise(w, 1, 2, Block, endHeaders));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(4 + Block.Length, Http2FrameType.PushPromise, endHeaders ? Http2FrameFlags.EndHeaders : Http2FrameFlags.None, 1), header);
            var frame = Http2FrameReader.ReadPushPromise(header, payload);
            Assert.Equal(2, frame.PromisedStreamId);
            Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
            Assert.Equal(endHeaders, frame.EndHeaders);
        });
    }

    [Fact]
    public void PUSH_PROMISE_PaddedWithReservedBit_StripsPaddingAndIgnoresBit()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.PushPromise, Http2FrameFlags.Padded | Http2FrameFlags.EndHeaders, 1, [1, 0x80, 0, 0, 4, .. Block, 0]);

        ForEachSplit(bytes, (header, payload) =>
        {
            var frame = Http2FrameReader.ReadPushPromise(header, payload);
            Assert.Equal(4, frame.PromisedStreamId);
            Assert.Equal(Block, frame.HeaderBlockFragment.ToArray());
        });
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void PING_RoundTrip(bool ack)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WritePing(w, 0x0102030405060708UL, ack));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(8, Http2FrameType.Ping, ack ? Http2FrameFlags.Ack : Http2FrameFlags.None, 0), header);
            Assert.Equal(new PingFrame(0x0102030405060708UL, ack), Http2FrameReader.ReadPing(header, payload));
        });
        Assert.Equal(new byte[] { 1, 2, 3, 4, 5, 6, 7, 8 }, bytes[9..]);
    }

    [Fact]
    public void GOAWAY_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteGoAway(w, 0x7FFF_FFFF, Http2ErrorCode.EnhanceYourCalm, "calm down"u8));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(17, Http2FrameType.GoAway, Http2FrameFlags.None, 0), header);
            var frame = Http2FrameReader.ReadGoAway(header, payload);
            Assert.Equal(0x7FFF_FFFF, frame.LastStreamId);
            Assert.Equal(Http2ErrorCode.EnhanceYourCalm, frame.ErrorCode);
            Assert.Equal("calm down"u8.ToArray(), frame.DebugData.ToArray());
        });
    }

    [Fact]
    public void GOAWAY_NoDebugData_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteGoAway(w, 0, Http2ErrorCode.NoError, default));

        var (header, payload) = FrameBytes.ReadOne(bytes);
        var frame = Http2FrameReader.ReadGoAway(header, payload);

        Assert.Equal(8, header.Length);
        Assert.Equal(0, frame.LastStreamId);
        Assert.Equal(Http2ErrorCode.NoError, frame.ErrorCode);
        Assert.True(frame.DebugData.IsEmpty);
    }

    [Theory]
    [InlineData(0, 1)]
    [InlineData(1, int.MaxValue)]
    public void WINDOW_UPDATE_RoundTrip(int streamId, int increment)
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteWindowUpdate(w, streamId, increment));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(4, Http2FrameType.WindowUpdate, Http2FrameFlags.None, streamId), header);
            Assert.Equal(increment, Http2FrameReader.ReadWindowUpdate(header, payload).WindowSizeIncrement);
        });
    }

    [Fact]
    public void WINDOW_UPDATE_ZeroIncrement_IsReturnedNotThrown()
    {
        // RFC 9113 §6.9: a zero increment is a stream or a connection error depending on the stream; the engine decides.
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteWindowUpdate(w, 1, 0));

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(0, Http2FrameReader.ReadWindowUpdate(header, payload).WindowSizeIncrement);
    }

    [Fact]
    public void WINDOW_UPDATE_ReservedBitSet_IsIgnored()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.WindowUpdate, Http2FrameFlags.None, 0, 0x80, 0, 0, 0x10);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(16, Http2FrameReader.ReadWindowUpdate(header, payload).WindowSizeIncrement);
    }

    [Fact]
    public void GOAWAY_ReservedBitSet_IsIgnored()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.GoAway, Http2FrameFlags.None, 0, 0x80, 0, 0, 7, 0, 0, 0, 0);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(7, Http2FrameReader.ReadGoAway(header, payload).LastStreamId);
    }

    [Fact]
    public void WriteFrame_UnknownType_RoundTrip()
    {
        byte[] bytes = FrameBytes.Write(w => Http2FrameWriter.WriteFrame(w, (Http2FrameType)0x20, (Http2FrameFlags)0x0F, 3, [9, 8, 7]));

        ForEachSplit(bytes, (header, payload) =>
        {
            Assert.Equal(new Http2FrameHeader(3, (Http2FrameType)0x20, (Http2FrameFlags)0x0F, 3), header);
            Assert.Equal(new byte[] { 9, 8, 7 }, payload.ToArray());
        });
    }

    [Fact]
    public void Writers_ReservedBits_AreWrittenAsZero()
    {
        // RFC 9113 §4.1: the reserved bit "MUST remain unset (0x0) when sending". WriteFrameHeader masks it even
        // when a caller hands it a header whose id has the top bit set.
        Span<byte> destination = stackalloc byte[9];
        Http2FrameWriter.WriteFrameHeader(destination, new Http2FrameHeader(0, Http2FrameType.Data, Http2FrameFlags.None, unchecked((int)0x8000_0001)));
        Assert.Equal(new byte[] { 0, 0, 0, 0, 0, 0, 0, 0, 1 }, destination.ToArray());

        byte[] goAway = FrameBytes.Write(w => Http2FrameWriter.WriteGoAway(w, 0x7FFF_FFFF, Http2ErrorCode.NoError, default));
        Assert.Equal(0x7F, goAway[9]);
        byte[] windowUpdate = FrameBytes.Write(w => Http2FrameWriter.WriteWindowUpdate(w, 0x7FFF_FFFF, 0x7FFF_FFFF));
        Assert.Equal(0x7F, windowUpdate[5]);
        Assert.Equal(0x7F, windowUpdate[9]);
        byte[] pushPromise = FrameBytes.Write(w => Http2FrameWriter.WritePushPromise(w, 1, 0x7FFF_FFFF, default, true));
        Assert.Equal(0x7F, pushPromise[9]);
    }

    [Fact]
    public void Writers_NegativeStreamId_Throw()
    {
        var output = new ArrayBufferWriter<byte>();

        Assert.Throws<ArgumentOutOfRangeException>(() => Http2FrameWriter.WriteData(output, -1, ReadOnlySpan<byte>.Empty, false));
        Assert.Throws<ArgumentOutOfRangeException>(() => Http2FrameWriter.WriteWindowUpdate(output, 1, -5));
        Assert.Throws<ArgumentOutOfRangeException>(() => Http2FrameWriter.WritePriority(output, 1, -1, false, 0));
        Assert.Equal(0, output.WrittenCount);
    }

    [Fact]
    public void WriteData_PayloadAboveLengthField_Throws()
    {
        var output = new ArrayBufferWriter<byte>();
        var data = new byte[Http2FrameReader.MaxFramePayloadLength + 1];

        Assert.Throws<ArgumentOutOfRangeException>(() => Http2FrameWriter.WriteData(output, 1, data, false));
        Assert.Throws<ArgumentOutOfRangeException>(() => Http2FrameWriter.WriteData(output, 1, new ReadOnlySequence<byte>(data), false));
        Assert.Equal(0, output.WrittenCount);
    }

    [Fact]
    public void Writers_SeveralFrames_AppendInOrder()
    {
        var output = new ArrayBufferWriter<byte>(16);
        Http2FrameWriter.WriteSettingsAck(output);
        Http2FrameWriter.WriteHeaders(output, 1, Block, endStream: false, endHeaders: true);
        Http2FrameWriter.WriteData(output, 1, new byte[20_000], endStream: true);

        var buffer = new ReadOnlySequence<byte>(output.WrittenMemory);
        var types = new List<Http2FrameType>();
        while (Http2FrameReader.TryReadFrame(ref buffer, 20_000, out var header, out _))
        {
            types.Add(header.Type);
        }

        Assert.Equal([Http2FrameType.Settings, Http2FrameType.Headers, Http2FrameType.Data], types);
        Assert.True(buffer.IsEmpty);
    }
}
