using System.Buffers;
using System.IO.Pipelines;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>The codec against the buffers it meets in production: PipeWriter output and multi-segment PipeReader input.</summary>
public class Http2FramePipeTests
{
    [Fact]
    public async Task Frames_ThroughPipeWithSmallSegments_ReadBackExactly()
    {
        var pipe = new Pipe(new PipeOptions(minimumSegmentSize: 256, pauseWriterThreshold: 0, useSynchronizationContext: false));
        byte[] body = Enumerable.Range(0, 40_000).Select(i => (byte)(i % 251)).ToArray();
        byte[] block = Enumerable.Range(0, 700).Select(i => (byte)i).ToArray();

        Http2FrameWriter.WriteSettings(pipe.Writer, [new(Http2SettingsParameter.MaxFrameSize, 40_000)]);
        Http2FrameWriter.WriteHeaders(pipe.Writer, 1, block, endStream: false, endHeaders: false);
        Http2FrameWriter.WriteContinuation(pipe.Writer, 1, block, endHeaders: true);
        Http2FrameWriter.WriteData(pipe.Writer, 1, body, endStream: true);
        Http2FrameWriter.WriteGoAway(pipe.Writer, 1, Http2ErrorCode.NoError, block);
        await pipe.Writer.CompleteAsync();

        ReadResult result = await pipe.Reader.ReadAsync();
        while (!result.IsCompleted)
        {
            pipe.Reader.AdvanceTo(result.Buffer.Start, result.Buffer.End);
            result = await pipe.Reader.ReadAsync();
        }

        ReadOnlySequence<byte> buffer = result.Buffer;
        Assert.False(buffer.IsSingleSegment);

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 40_000, out var header, out var payload));
        Assert.Equal(new Http2Setting(Http2SettingsParameter.MaxFrameSize, 40_000), Http2FrameReader.ReadSetting(payload, Http2FrameReader.ReadSettings(header, payload) - 1));

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 40_000, out header, out payload));
        Assert.Equal(block, Http2FrameReader.ReadHeaders(header, payload).HeaderBlockFragment.ToArray());

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 40_000, out header, out payload));
        Assert.Equal(block, Http2FrameReader.ReadContinuation(header, payload).HeaderBlockFragment.ToArray());

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 40_000, out header, out payload));
        var data = Http2FrameReader.ReadData(header, payload);
        Assert.Equal(body, data.Data.ToArray());
        Assert.True(data.EndStream);

        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 40_000, out header, out payload));
        Assert.Equal(block, Http2FrameReader.ReadGoAway(header, payload).DebugData.ToArray());

        Assert.True(buffer.IsEmpty);
        pipe.Reader.AdvanceTo(buffer.End);
        await pipe.Reader.CompleteAsync();
    }

    [Fact]
    public void WriteData_IntoWriterWithTinySpans_WritesEveryOctet()
    {
        var output = new TinySpanWriter();
        byte[] body = Enumerable.Range(0, 50_000).Select(i => (byte)(i * 13)).ToArray();

        Http2FrameWriter.WriteData(output, 7, FrameBytes.Split(body, 3, 30_000), endStream: false);
        Http2FrameWriter.WriteGoAway(output, 7, Http2ErrorCode.Cancel, body.AsSpan(0, 20_000));

        var buffer = new ReadOnlySequence<byte>(output.Written.ToArray());
        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 50_000, out var header, out var payload));
        Assert.Equal(body, Http2FrameReader.ReadData(header, payload).Data.ToArray());
        Assert.True(Http2FrameReader.TryReadFrame(ref buffer, 50_000, out header, out payload));
        Assert.Equal(body[..20_000], Http2FrameReader.ReadGoAway(header, payload).DebugData.ToArray());
        Assert.True(buffer.IsEmpty);
        Assert.True(output.LargestSpan <= 16 * 1024, $"asked for a {output.LargestSpan}-octet span");
    }

    /// <summary>An IBufferWriter that hands out exactly the size asked (at least 1), like a pool near its segment end.</summary>
    private sealed class TinySpanWriter : IBufferWriter<byte>
    {
        private byte[] _current = [];

        public List<byte> Written { get; } = [];

        public int LargestSpan { get; private set; }

        public void Advance(int count) => Written.AddRange(_current.AsSpan(0, count));

        public Memory<byte> GetMemory(int sizeHint = 0)
        {
            _current = new byte[Math.Max(sizeHint, 1)];
            LargestSpan = Math.Max(LargestSpan, _current.Length);
            return _current;
        }

        public Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;
    }
}
