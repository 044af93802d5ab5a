using System.Buffers;
using System.IO.Pipelines;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>What a stream pipe asks its pool for when bytes are copied into it in blocks.</summary>
public sealed class StreamPipeWritesTests
{
    [Theory]
    [InlineData(100, 16384, new[] { 100 })]
    [InlineData(5000, 16384, new[] { 4096, 904 })] // less than a large block: never one of 16 KiB
    [InlineData(16384, 16384, new[] { 16384 })] // a whole DATA frame: one block, not four
    [InlineData(16384 + 5000, 16384, new[] { 16384, 4096, 904 })]
    [InlineData(40000, 16384, new[] { 16384, 16384, 4096, 3136 })]
    [InlineData(10000, 4096, new[] { 4096, 4096, 1808 })] // a pool whose largest block is 4 KiB: as before
    public void WriteInBlocks_AsksForAWholeLargeBlockOnlyWhileThatMuchIsLeft(int length, int blockSize, int[] expected)
    {
        var pool = new RecordingPool(blockSize);
        var pipe = new Pipe(new PipeOptions(pool: pool, minimumSegmentSize: 1, pauseWriterThreshold: 0, useSynchronizationContext: false));
        var source = Enumerable.Range(0, length).Select(i => (byte)i).ToArray();

        pipe.Writer.WriteInBlocks(source, blockSize);
        pipe.Writer.Complete();

        Assert.Equal(expected, pool.Rents);
        Assert.True(pipe.Reader.TryRead(out var result));
        Assert.Equal(source, result.Buffer.ToArray());
        pipe.Reader.AdvanceTo(result.Buffer.End);
        pipe.Reader.Complete();
    }

    /// <summary>Hands out arrays of exactly the size asked for and records each request.</summary>
    private sealed class RecordingPool(int maxBufferSize) : MemoryPool<byte>
    {
        public List<int> Rents { get; } = [];

        public override int MaxBufferSize => maxBufferSize;

        public override IMemoryOwner<byte> Rent(int minBufferSize = -1)
        {
            Rents.Add(minBufferSize);
            return new Owner(new byte[minBufferSize]);
        }

        protected override void Dispose(bool disposing)
        {
        }

        private sealed class Owner(byte[] array) : IMemoryOwner<byte>
        {
            public Memory<byte> Memory => array;

            public void Dispose()
            {
            }
        }
    }
}
