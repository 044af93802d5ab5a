using BenchmarkDotNet.Attributes;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;

namespace Proxy.Benchmarks.Http2;

/// <summary>
/// Frame codec cost per frame, over what a server reads from a busy gRPC connection: for each of
/// 100 streams a HEADERS frame (warm-table request block) and a DATA frame (a 5-octet gRPC prefix and a
/// small message, END_STREAM), plus a connection WINDOW_UPDATE every 10 streams: 210 frames.
/// </summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
public class FrameBenchmarks
{
    private const int Streams = 100;
    private const int FrameCount = Streams * 2 + Streams / 10;

    private readonly ArrayBufferWriter<byte> _output = new(16 * 1024);
    private byte[] _headerBlock = [];
    private byte[] _message = [];
    private ReadOnlySequence<byte> _input;

    /// <summary>
    /// 0: one contiguous buffer. 4096: pool-sized segments, as a pipe delivers a large read (a few frames
    /// straddle a boundary). 61: every frame straddles one, the worst case for the multi-segment paths.
    /// </summary>
    [Params(0, 4096, 61)]
    public int SegmentSize { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        var encoder = new HpackEncoder();
        var block = new ArrayBufferWriter<byte>();
        foreach (var (name, value) in GrpcHeaders.Request)
        {
            encoder.EncodeHeader(block, name, value);
        }
        block.ResetWrittenCount();
        foreach (var (name, value) in GrpcHeaders.Request)
        {
            encoder.EncodeHeader(block, name, value);
        }
        _headerBlock = block.WrittenSpan.ToArray();
        _message = new byte[5 + 16];
        _message[4] = 16; // gRPC length-prefixed message: not compressed, 16 octets

        WriteAll();
        _input = SegmentedSequence.Create(_output.WrittenSpan.ToArray(), SegmentSize);
        if (ReadAll() != FrameCount)
        {
            throw new InvalidOperationException("The frame buffer did not parse back to every frame.");
        }
    }

    /// <summary>TryReadFrame plus the typed parse the read loop does for each frame.</summary>
    [Benchmark(OperationsPerInvoke = FrameCount)]
    public int Read() => ReadAll();

    /// <summary>The same frames written into a reused buffer, as the writer loop does.</summary>
    [Benchmark(OperationsPerInvoke = FrameCount)]
    public int Write()
    {
        WriteAll();
        return _output.WrittenCount;
    }

    private int ReadAll()
    {
        var buffer = _input;
        int frames = 0;
        long octets = 0;
        while (Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out var payload))
        {
            frames++;
            switch (header.Type)
            {
                case Http2FrameType.Headers:
                    octets += Http2FrameReader.ReadHeaders(header, payload).HeaderBlockFragment.Length;
                    break;
                case Http2FrameType.Data:
                    octets += Http2FrameReader.ReadData(header, payload).FlowControlledLength;
                    break;
                case Http2FrameType.WindowUpdate:
                    octets += Http2FrameReader.ReadWindowUpdate(header, payload).WindowSizeIncrement;
                    break;
                default:
                    throw new InvalidOperationException($"Unexpected {header.Type} frame.");
            }
        }
        return octets > 0 ? frames : -1;
    }

    private void WriteAll()
    {
        _output.ResetWrittenCount();
        for (int i = 0; i < Streams; i++)
        {
            int streamId = 2 * i + 1;
            Http2FrameWriter.WriteHeaders(_output, streamId, _headerBlock, endStream: false, endHeaders: true);
            Http2FrameWriter.WriteData(_output, streamId, _message, endStream: true);
            if (i % 10 == 9)
            {
                Http2FrameWriter.WriteWindowUpdate(_output, 0, 10 * _message.Length);
            }
        }
    }
}
