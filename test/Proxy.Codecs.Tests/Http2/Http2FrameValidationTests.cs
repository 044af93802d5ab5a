using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>
/// One test per RFC 9113 §6 rule the frame alone decides: the right error kind (connection vs stream)
/// and the right code. Frames are built byte by byte so the writer cannot hide a reader bug.
/// </summary>
public class Http2FrameValidationTests
{
    private delegate void FrameParser(in Http2FrameHeader header, in ReadOnlySequence<byte> payload);

    private static readonly FrameParser Data = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadData(h, p);
    private static readonly FrameParser Headers = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadHeaders(h, p);
    private static readonly FrameParser Priority = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadPriority(h, p);
    private static readonly FrameParser RstStream = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadRstStream(h, p);
    private static readonly FrameParser Settings = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadSettings(h, p);
    private static readonly FrameParser PushPromise = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadPushPromise(h, p);
    private static readonly FrameParser Ping = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadPing(h, p);
    private static readonly FrameParser GoAway = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadGoAway(h, p);
    private static readonly FrameParser WindowUpdate = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadWindowUpdate(h, p);
    private static readonly FrameParser Continuation = (in Http2FrameHeader h, in ReadOnlySequence<byte> p) => Http2FrameReader.ReadContinuation(h, p);

    /// <summary>Reads the frame through TryReadFrame, then asserts the parser throws a connection error with <paramref name="code"/>.</summary>
    private static Http2ConnectionException AssertConnectionError(byte[] bytes, FrameParser parse, Http2ErrorCode code)
    {
        var (header, payload) = FrameBytes.ReadOne(bytes);
        var error = Assert.Throws<Http2ConnectionException>(() => parse(header, payload));
        Assert.Equal(code, error.ErrorCode);
        Assert.False(string.IsNullOrEmpty(error.Token));
        return error;
    }

    private static Http2StreamException AssertStreamError(byte[] bytes, FrameParser parse, Http2ErrorCode code)
    {
        var (header, payload) = FrameBytes.ReadOne(bytes);
        var error = Assert.Throws<Http2StreamException>(() => parse(header, payload));
        Assert.Equal(code, error.ErrorCode);
        Assert.Equal(header.StreamId, error.StreamId);
        return error;
    }

    private static byte[] Setting(Http2SettingsParameter parameter, uint value)
        => [(byte)((ushort)parameter >> 8), (byte)parameter, (byte)(value >> 24), (byte)(value >> 16), (byte)(value >> 8), (byte)value];

    // ---- stream 0 where a stream is required: connection PROTOCOL_ERROR (RFC 9113 §6.1-§6.4, §6.6, §6.10) ----

    [Fact]
    public void DATA_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.None, 0, 1), Data, Http2ErrorCode.ProtocolError);

    [Fact]
    public void HEADERS_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.EndHeaders, 0, 0x82), Headers, Http2ErrorCode.ProtocolError);

    [Fact]
    public void CONTINUATION_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Continuation, Http2FrameFlags.EndHeaders, 0, 0x82), Continuation, Http2ErrorCode.ProtocolError);

    [Fact]
    public void RST_STREAM_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.RstStream, Http2FrameFlags.None, 0, 0, 0, 0, 8), RstStream, Http2ErrorCode.ProtocolError);

    [Fact]
    public void PRIORITY_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Priority, Http2FrameFlags.None, 0, 0, 0, 0, 1, 16), Priority, Http2ErrorCode.ProtocolError);

    [Fact]
    public void PUSH_PROMISE_OnStreamZero_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.PushPromise, Http2FrameFlags.EndHeaders, 0, 0, 0, 0, 2), PushPromise, Http2ErrorCode.ProtocolError);

    // ---- a stream where stream 0 is required: connection PROTOCOL_ERROR (RFC 9113 §6.5, §6.7, §6.8) ----

    [Fact]
    public void SETTINGS_OnNonZeroStream_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 1), Settings, Http2ErrorCode.ProtocolError);

    [Fact]
    public void PING_OnNonZeroStream_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Ping, Http2FrameFlags.None, 1, new byte[8]), Ping, Http2ErrorCode.ProtocolError);

    [Fact]
    public void GOAWAY_OnNonZeroStream_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.GoAway, Http2FrameFlags.None, 1, new byte[8]), GoAway, Http2ErrorCode.ProtocolError);

    // ---- padding (RFC 9113 §6.1, §6.2, §6.6): connection PROTOCOL_ERROR ----

    [Fact]
    public void DATA_PaddingEqualToPayloadLength_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1, 3, 0, 0), Data, Http2ErrorCode.ProtocolError);

    [Fact]
    public void DATA_PaddingLongerThanPayload_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1, 200, 0, 0), Data, Http2ErrorCode.ProtocolError);

    [Fact]
    public void DATA_PaddedWithEmptyPayload_FrameSizeError()
    {
        // No room for the Pad Length field: too small for mandatory data (RFC 9113 §4.2); DATA counts against the
        // connection window, so it is a connection error.
        AssertConnectionError(FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1), Data, Http2ErrorCode.FrameSizeError);
    }

    [Fact]
    public void HEADERS_PaddingEqualToPayloadLength_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Padded | Http2FrameFlags.EndHeaders, 1, 4, 0x82, 0, 0), Headers, Http2ErrorCode.ProtocolError);

    [Fact]
    public void HEADERS_PaddingOverlapsPriorityFields_ProtocolError()
    {
        // Pad Length 2 + 5 octets of priority + 2 octets of padding = 8 > 7 octets of payload.
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Padded | Http2FrameFlags.Priority | Http2FrameFlags.EndHeaders, 1, 2, 0, 0, 0, 3, 16, 0);
        AssertConnectionError(bytes, Headers, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public void PUSH_PROMISE_PaddingTooLong_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.PushPromise, Http2FrameFlags.Padded | Http2FrameFlags.EndHeaders, 1, 2, 0, 0, 0, 2, 0), PushPromise, Http2ErrorCode.ProtocolError);

    // ---- HEADERS / PUSH_PROMISE too short for their fixed fields: connection FRAME_SIZE_ERROR (RFC 9113 §4.2) ----

    [Fact]
    public void HEADERS_PriorityFlagShorterThanFive_FrameSizeError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Priority | Http2FrameFlags.EndHeaders, 1, 0, 0, 0, 3), Headers, Http2ErrorCode.FrameSizeError);

    [Fact]
    public void HEADERS_PriorityAndPaddedShorterThanSix_FrameSizeError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Headers, Http2FrameFlags.Priority | Http2FrameFlags.Padded | Http2FrameFlags.EndHeaders, 1, 0, 0, 0, 0, 3), Headers, Http2ErrorCode.FrameSizeError);

    [Fact]
    public void PUSH_PROMISE_ShorterThanPromisedStreamId_FrameSizeError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.PushPromise, Http2FrameFlags.EndHeaders, 1, 0, 0, 2), PushPromise, Http2ErrorCode.FrameSizeError);

    // ---- SETTINGS (RFC 9113 §6.5, §6.5.2): connection errors ----

    [Fact]
    public void SETTINGS_LengthNotMultipleOfSix_FrameSizeError()
    {
        var error = AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, 0, 3, 0, 0, 0, 100, 0), Settings, Http2ErrorCode.FrameSizeError);
        Assert.Equal("settings_length", error.Token);
    }

    [Fact]
    public void SETTINGS_AckWithPayload_FrameSizeError()
    {
        var error = AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.Ack, 0, Setting(Http2SettingsParameter.EnablePush, 0)), Settings, Http2ErrorCode.FrameSizeError);
        Assert.Equal("settings_ack_with_payload", error.Token);
    }

    [Fact]
    public void SETTINGS_EnablePushNotZeroOrOne_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, Setting(Http2SettingsParameter.EnablePush, 2)), Settings, Http2ErrorCode.ProtocolError);

    [Fact]
    public void SETTINGS_InitialWindowSizeAboveMax_FlowControlError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, Setting(Http2SettingsParameter.InitialWindowSize, 0x8000_0000u)), Settings, Http2ErrorCode.FlowControlError);

    [Fact]
    public void SETTINGS_MaxFrameSizeBelowMinimum_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, Setting(Http2SettingsParameter.MaxFrameSize, 16_383)), Settings, Http2ErrorCode.ProtocolError);

    [Fact]
    public void SETTINGS_MaxFrameSizeAboveMaximum_ProtocolError()
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, Setting(Http2SettingsParameter.MaxFrameSize, 16_777_216)), Settings, Http2ErrorCode.ProtocolError);

    [Fact]
    public void SETTINGS_ValuesAtTheirLimits_AreAccepted()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0,
        [
            .. Setting(Http2SettingsParameter.EnablePush, 1),
            .. Setting(Http2SettingsParameter.InitialWindowSize, int.MaxValue),
            .. Setting(Http2SettingsParameter.MaxFrameSize, 16_384),
            .. Setting(Http2SettingsParameter.MaxFrameSize, 16_777_215),
            .. Setting((Http2SettingsParameter)0x99, uint.MaxValue),
        ]);

        var (header, payload) = FrameBytes.ReadOne(bytes);

        Assert.Equal(5, Http2FrameReader.ReadSettings(header, payload));
    }

    [Fact]
    public void SETTINGS_InvalidValueAfterValidOnes_FragmentedAnywhere_IsDetected()
    {
        byte[] bytes = FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0,
        [
            .. Setting(Http2SettingsParameter.HeaderTableSize, 4096),
            .. Setting(Http2SettingsParameter.MaxConcurrentStreams, 100),
            .. Setting(Http2SettingsParameter.InitialWindowSize, uint.MaxValue),
        ]);

        foreach (ReadOnlySequence<byte> sequence in FrameBytes.EverySplit(bytes))
        {
            var (header, payload) = FrameBytes.ReadOne(sequence);
            var error = Assert.Throws<Http2ConnectionException>(() => Http2FrameReader.ReadSettings(header, payload));
            Assert.Equal(Http2ErrorCode.FlowControlError, error.ErrorCode);
        }
    }

    // ---- fixed lengths (RFC 9113 §6.3, §6.4, §6.7-§6.9) ----

    [Theory]
    [InlineData(0)]
    [InlineData(7)]
    [InlineData(9)]
    public void PING_LengthNotEight_FrameSizeError(int length)
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.Ping, Http2FrameFlags.None, 0, new byte[length]), Ping, Http2ErrorCode.FrameSizeError);

    [Theory]
    [InlineData(3)]
    [InlineData(5)]
    public void RST_STREAM_LengthNotFour_FrameSizeError(int length)
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.RstStream, Http2FrameFlags.None, 1, new byte[length]), RstStream, Http2ErrorCode.FrameSizeError);

    [Theory]
    [InlineData(4)]
    [InlineData(6)]
    public void PRIORITY_LengthNotFive_FrameSizeStreamError(int length)
    {
        // RFC 9113 §6.3: a stream error, not a connection error.
        var error = AssertStreamError(FrameBytes.Raw(Http2FrameType.Priority, Http2FrameFlags.None, 3, new byte[length]), Priority, Http2ErrorCode.FrameSizeError);
        Assert.Equal(3, error.StreamId);
    }

    [Fact]
    public void PRIORITY_DependsOnItself_StreamProtocolError()
    {
        // RFC 9113 §5.3.1: "A stream cannot depend on itself."
        var error = AssertStreamError(FrameBytes.Raw(Http2FrameType.Priority, Http2FrameFlags.None, 5, 0x80, 0, 0, 5, 16), Priority, Http2ErrorCode.ProtocolError);
        Assert.Equal("priority_self_dependency", error.Token);
    }

    [Theory]
    [InlineData(0, 3)]
    [InlineData(0, 5)]
    [InlineData(1, 3)]
    [InlineData(1, 0)]
    public void WINDOW_UPDATE_LengthNotFour_FrameSizeError(int streamId, int length)
    {
        // RFC 9113 §6.9: a connection error even on a stream.
        AssertConnectionError(FrameBytes.Raw(Http2FrameType.WindowUpdate, Http2FrameFlags.None, streamId, new byte[length]), WindowUpdate, Http2ErrorCode.FrameSizeError);
    }

    [Theory]
    [InlineData(0)]
    [InlineData(7)]
    public void GOAWAY_ShorterThanEight_FrameSizeError(int length)
        => AssertConnectionError(FrameBytes.Raw(Http2FrameType.GoAway, Http2FrameFlags.None, 0, new byte[length]), GoAway, Http2ErrorCode.FrameSizeError);

    [Fact]
    public void ConnectionErrors_OnFragmentedFrames_AreStillDetected()
    {
        // The checks that read payload octets (padding, setting values) must see across segment boundaries.
        byte[] padded = FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded, 1, 9, 1, 2, 3);
        byte[] enablePush = FrameBytes.Raw(Http2FrameType.Settings, Http2FrameFlags.None, 0, Setting(Http2SettingsParameter.EnablePush, 0x0100));

        foreach (ReadOnlySequence<byte> sequence in FrameBytes.EverySplit(padded))
        {
            var (header, payload) = FrameBytes.ReadOne(sequence);
            Assert.Equal(Http2ErrorCode.ProtocolError, Assert.Throws<Http2ConnectionException>(() => Http2FrameReader.ReadData(header, payload)).ErrorCode);
        }

        foreach (ReadOnlySequence<byte> sequence in FrameBytes.EverySplit(enablePush))
        {
            var (header, payload) = FrameBytes.ReadOne(sequence);
            Assert.Equal(Http2ErrorCode.ProtocolError, Assert.Throws<Http2ConnectionException>(() => Http2FrameReader.ReadSettings(header, payload)).ErrorCode);
        }
    }
}
