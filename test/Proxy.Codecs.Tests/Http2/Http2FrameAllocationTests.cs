using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Codecs.Tests.Http2;

/// <summary>The read path must not allocate: it runs once per inbound frame on every connection.</summary>
public class Http2FrameAllocationTests
{
    [Fact]
    public void TryReadFrame_ReadData_AllocatesNothing()
    {
        byte[] bytes =
        [
            .. FrameBytes.Raw(Http2FrameType.Data, Http2FrameFlags.Padded | Http2FrameFlags.EndStream, 1, 2, 0xAA, 0xBB, 0xCC, 0, 0),
            .. FrameBytes.Write(w => Http2FrameWriter.WriteData(w, 3, new byte[100], endStream: false)),
        ];
        // Multi-segment, with a boundary inside each frame header, so the slow (copying) paths run too.
        ReadOnlySequence<byte> input = FrameBytes.Split(bytes, 4, 20, 60);

        long sink = ReadAll(input); // warm up: JIT and any lazy static initialisation
        long before = GC.GetAllocatedBytesForCurrentThread();
        for (int i = 0; i < 100; i++)
        {
            sink += ReadAll(input);
        }

        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;

        Assert.Equal(0, allocated);
        Assert.Equal(101 * (3 + 100), sink);
    }

    [Fact]
    public void ControlFrameReaders_AllocateNothing()
    {
        byte[] bytes =
        [
            .. FrameBytes.Write(w => Http2FrameWriter.WriteSettings(w, [new(Http2SettingsParameter.MaxFrameSize, 20_000), new(Http2SettingsParameter.InitialWindowSize, 1)])),
            .. FrameBytes.Write(w => Http2FrameWriter.WritePing(w, 42, ack: false)),
            .. FrameBytes.Write(w => Http2FrameWriter.WriteWindowUpdate(w, 0, 1000)),
            .. FrameBytes.Write(w => Http2FrameWriter.WriteHeaders(w, 1, [0x82, 0x86], endStream: true, endHeaders: true)),
        ];
        ReadOnlySequence<byte> input = FrameBytes.Split(bytes, 7, 30, 45);

        long sink = ReadControl(input);
        long before = GC.GetAllocatedBytesForCurrentThread();
        for (int i = 0; i < 100; i++)
        {
            sink += ReadControl(input);
        }

        long allocated = GC.GetAllocatedBytesForCurrentThread() - before;

        Assert.Equal(0, allocated);
        Assert.Equal(101 * (20_000 + 1 + 42 + 1000 + 2), sink);
    }

    private static long ReadAll(ReadOnlySequence<byte> buffer)
    {
        long total = 0;
        while (Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out var payload))
        {
            total += Http2FrameReader.ReadData(header, payload).Data.Length;
        }

        return total;
    }

    private static long ReadControl(ReadOnlySequence<byte> buffer)
    {
        long total = 0;
        while (Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out var payload))
        {
            switch (header.Type)
            {
                case Http2FrameType.Settings:
                    int count = Http2FrameReader.ReadSettings(header, payload);
                    for (int i = 0; i < count; i++)
                    {
                        total += Http2FrameReader.ReadSetting(payload, i).Value;
                    }

                    break;
                case Http2FrameType.Ping:
                    total += (long)Http2FrameReader.ReadPing(header, payload).OpaqueData;
                    break;
                case Http2FrameType.WindowUpdate:
                    total += Http2FrameReader.ReadWindowUpdate(header, payload).WindowSizeIncrement;
                    break;
                case Http2FrameType.Headers:
                    total += Http2FrameReader.ReadHeaders(header, payload).HeaderBlockFragment.Length;
                    break;
            }
        }

        return total;
    }
}
