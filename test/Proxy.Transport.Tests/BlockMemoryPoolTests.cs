using System.Buffers;
using System.IO.Pipelines;
using System.Runtime.InteropServices;
using Proxy.Transport.Buffers;

namespace Proxy.Transport.Tests;

public class BlockMemoryPoolTests
{
    [Fact]
    public void Rent_AfterDispose_ReusesTheSameBlock()
    {
        var pool = new BlockMemoryPool(blockSize: 1024);
        var first = pool.Rent(100);
        var array = GetArray(first.Memory);
        first.Dispose();
        Assert.Equal(1, pool.RetainedBlocks);

        var second = pool.Rent(1024);

        Assert.Same(array, GetArray(second.Memory));
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void Pin_OfAPinnedBlocksSlice_TakesNoGCHandle(bool pinned)
    {
        var pool = new BlockMemoryPool(blockSize: 1024, pinned: pinned);
        using var block = pool.Rent();
        var slice = ((ReadOnlyMemory<byte>)block.Memory).Slice(100, 200); // as a pipe's segment reaches the socket

        using var handle = slice.Pin();

        // A block of the pinned heap is marked pre-pinned: Pin() only takes its address. An ordinary array needs a
        // pinned GCHandle (MemoryHandle keeps it in a private field; nothing public tells the two apart).
        var field = typeof(MemoryHandle).GetField("_handle", System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Instance)!;
        Assert.Equal(!pinned, ((GCHandle)field.GetValue(handle)!).IsAllocated);
        Assert.True(MemoryMarshal.TryGetArray(slice, out var segment)); // the mark does not disturb the slice
        Assert.Same(GetArray(block.Memory), segment.Array);
        Assert.Equal((100, 200), (segment.Offset, segment.Count));
    }

    [Fact]
    public void InputDefault_ReceiveSizedRentsGet16KiB_TheRestOfABatch64KiB()
    {
        var pool = BlockMemoryPool.InputDefault;
        using var receive = pool.Rent(8 * 1024); // SocketTransportOptions.MinReceiveBufferSize
        using var rest = pool.Rent(48 * 1024);   // what a batch's second receive asks for

        Assert.Equal(16 * 1024, receive.Memory.Length);
        Assert.Equal(BlockMemoryPool.LargeInputBlockSize, rest.Memory.Length);
        Assert.Equal(BlockMemoryPool.LargeInputBlockSize, pool.MaxBufferSize); // a pipe asks the pool, not ArrayPool, for it
        Assert.Same(pool, new Proxy.Transport.Sockets.SocketTransportOptions().InputMemoryPool);
    }

    [Fact]
    public void Rent_SeveralKept_LastReturnedComesFirst()
    {
        var pool = new BlockMemoryPool(blockSize: 1024);
        var a = pool.Rent();
        var b = pool.Rent();
        var arrayB = GetArray(b.Memory);
        a.Dispose();
        b.Dispose();

        using var next = pool.Rent();

        Assert.Same(arrayB, GetArray(next.Memory)); // the warmest block, not the coldest
    }

    [Fact]
    public void Rent_AnySizeUpToMax_ReturnsAWholeArrayBackedBlock()
    {
        var pool = new BlockMemoryPool(blockSize: 4096);
        using var small = pool.Rent(1);
        using var any = pool.Rent();

        Assert.Equal(4096, pool.MaxBufferSize);
        Assert.Equal(4096, small.Memory.Length);
        Assert.Equal(4096, any.Memory.Length);
        // The socket send loop gathers segments as arrays: blocks must be array-backed.
        Assert.True(MemoryMarshal.TryGetArray<byte>(small.Memory, out var segment) && segment.Offset == 0);
    }

    [Fact]
    public void Rent_LargerThanBlock_Throws()
    {
        var pool = new BlockMemoryPool(blockSize: 1024);
        Assert.Throws<ArgumentOutOfRangeException>(() => pool.Rent(1025));
    }

    [Fact]
    public void Dispose_Twice_BlockKeptOnce()
    {
        var pool = new BlockMemoryPool(blockSize: 1024);
        var block = pool.Rent();
        block.Dispose();
        block.Dispose();

        Assert.Equal(1, pool.RetainedBlocks);
        using var a = pool.Rent();
        using var b = pool.Rent();
        Assert.NotSame(GetArray(a.Memory), GetArray(b.Memory)); // never handed out twice
    }

    [Fact]
    public void Dispose_BeyondRetainedBound_BlockDropped()
    {
        var pool = new BlockMemoryPool(blockSize: 1024, maxRetainedBytes: 2 * 1024);
        var blocks = Enumerable.Range(0, 5).Select(_ => pool.Rent()).ToList();
        foreach (var block in blocks)
        {
            block.Dispose();
        }
        Assert.Equal(2, pool.RetainedBlocks);
    }

    [Fact]
    public async Task Pipe_MegabyteThroughput_SegmentsComeBackToThePool()
    {
        var pool = new BlockMemoryPool(blockSize: 16 * 1024);
        var pipe = new Pipe(new PipeOptions(pool: pool, pauseWriterThreshold: 0));
        var chunk = new byte[16 * 1024];
        for (var i = 0; i < 64; i++)
        {
            chunk.AsSpan().Fill((byte)i);
            pipe.Writer.Write(chunk);
        }
        await pipe.Writer.FlushAsync();
        var result = await pipe.Reader.ReadAsync();
        Assert.Equal(1024 * 1024, result.Buffer.Length);
        Assert.Equal(37, result.Buffer.Slice(37 * 16 * 1024, 1).FirstSpan[0]);
        pipe.Reader.AdvanceTo(result.Buffer.End);

        // Every block the pipe held is back (the pipe may keep its current write block).
        Assert.InRange(pool.RetainedBlocks, 63, 64);
        await pipe.Writer.CompleteAsync();
        await pipe.Reader.CompleteAsync();
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)] // sharded: a thread's home stack is its processor's, which may change between its calls
    public async Task RentAndDispose_ManyThreads_NoBlockSharedBetweenRenters(int shards)
    {
        var pool = new BlockMemoryPool(64, 1 << 20, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: shards);
        var failures = 0;
        await Task.WhenAll(Enumerable.Range(0, 4).Select(worker => Task.Run(() =>
        {
            for (var i = 0; i < 20_000; i++)
            {
                using var block = pool.Rent();
                var span = block.Memory.Span;
                span.Fill((byte)worker);
                if (span.IndexOfAnyExcept((byte)worker) >= 0)
                {
                    Interlocked.Increment(ref failures);
                }
            }
        }))).WaitAsync(Net.Patience);

        Assert.Equal(0, failures);
        Assert.InRange(pool.RetainedBlocks, 1, 4);
    }

    [Fact]
    public void TrimIdle_FreesOnlyBlocksNobodyRentedSinceTheLastTrim()
    {
        var pool = new BlockMemoryPool(blockSize: 1024);
        var burst = Enumerable.Range(0, 10).Select(_ => pool.Rent()).ToList();
        burst.ForEach(b => b.Dispose());
        Assert.Equal(10, pool.RetainedBlocks);

        // The first trim only starts the period: the blocks came back during it, so none counts as idle yet.
        Assert.Equal(0, pool.TrimIdle());
        Assert.Equal(10, pool.RetainedBlocks);

        // In this period three blocks are in use at once (the top three, last in first out); seven stay put.
        var used = Enumerable.Range(0, 3).Select(_ => pool.Rent()).ToList();
        var usedArrays = used.Select(b => GetArray(b.Memory)).ToList();
        used.ForEach(b => b.Dispose());

        Assert.Equal(7, pool.TrimIdle());
        Assert.Equal(3, pool.RetainedBlocks);

        // The three kept are the ones in use during the period.
        var again = Enumerable.Range(0, 3).Select(_ => pool.Rent()).ToList();
        Assert.Equal(usedArrays.OrderBy(a => a.GetHashCode()), again.Select(b => GetArray(b.Memory)).OrderBy(a => a.GetHashCode()));
        again.ForEach(b => b.Dispose());

        // A quiet period after that frees the rest.
        Assert.Equal(0, pool.TrimIdle());
        Assert.Equal(3, pool.TrimIdle());
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Fact]
    public void TrimIdle_ThenRent_StillReusesAndStillBounded()
    {
        var pool = new BlockMemoryPool(blockSize: 1024, maxRetainedBytes: 4 * 1024);
        var blocks = Enumerable.Range(0, 6).Select(_ => pool.Rent()).ToList();
        blocks.ForEach(b => b.Dispose());
        Assert.Equal(4, pool.RetainedBlocks);
        pool.TrimIdle();
        pool.TrimIdle();
        Assert.Equal(0, pool.RetainedBlocks);

        var block = pool.Rent();
        var array = GetArray(block.Memory);
        block.Dispose();
        Assert.Same(array, GetArray(pool.Rent().Memory));
    }

    [Fact]
    public void Rent_PoolWithSmallBlocks_SizeChosenByTheRequest()
    {
        var pool = new BlockMemoryPool(blockSize: 4096, maxRetainedBytes: 1 << 20, pinned: false, smallBlockSize: 1024, smallMaxRetainedBytes: 1 << 20);
        Assert.Equal(1024, pool.SmallBlockSize);
        Assert.Equal(4096, pool.MaxBufferSize);
        using (var small = pool.Rent(1))
        using (var edge = pool.Rent(1024))
        using (var large = pool.Rent(1025))
        using (var unspecified = pool.Rent())
        {
            Assert.Equal(1024, small.Memory.Length);
            Assert.Equal(1024, edge.Memory.Length);
            Assert.Equal(4096, large.Memory.Length);
            Assert.Equal(4096, unspecified.Memory.Length); // -1: the pool's own (largest) size
        }
        // Each size comes back to its own kind: a small rent reuses a small block and leaves the large ones kept.
        Assert.Equal(2, pool.RetainedBlocks); // the two large blocks
        var first = pool.Rent(100);
        var firstArray = GetArray(first.Memory);
        first.Dispose();
        using var second = pool.Rent(100);
        Assert.Same(firstArray, GetArray(second.Memory));
        Assert.Equal(2, pool.RetainedBlocks);
        using var large2 = pool.Rent(2000);
        Assert.Equal(4096, large2.Memory.Length);
        Assert.Equal(1, pool.RetainedBlocks);
    }

    [Fact]
    public void Pipe_SmallMinimumSegmentAndHints_SmallWritesTakeSmallBlocksLargeOnesLarge()
    {
        var pool = new BlockMemoryPool(blockSize: 4096, maxRetainedBytes: 1 << 20, pinned: false, smallBlockSize: 1024, smallMaxRetainedBytes: 1 << 20);
        var pipe = new Pipe(new PipeOptions(pool: pool, minimumSegmentSize: 1024, pauseWriterThreshold: 0, useSynchronizationContext: false));
        Assert.Equal(1024, pipe.Writer.GetMemory(60).Length);
        pipe.Writer.Advance(60);
        Assert.Equal(4096, pipe.Writer.GetMemory(4096).Length); // does not fit the rest of the small block: a large one
        pipe.Writer.Advance(4096);
        pipe.Writer.Complete();
        Assert.True(pipe.Reader.TryRead(out var result));
        Assert.Equal(4156, result.Buffer.Length);
        pipe.Reader.AdvanceTo(result.Buffer.End);
        pipe.Reader.Complete();
    }

    [Fact]
    public void TrimIdle_PoolWithSmallBlocks_TrimsBothSizes()
    {
        var pool = new BlockMemoryPool(blockSize: 4096, maxRetainedBytes: 1 << 20, pinned: false, smallBlockSize: 1024, smallMaxRetainedBytes: 1 << 20);
        var blocks = new[] { pool.Rent(10), pool.Rent(10), pool.Rent(4000) };
        foreach (var block in blocks)
        {
            block.Dispose();
        }
        Assert.Equal(0, pool.TrimIdle()); // the first period starts now: nothing is known idle yet
        Assert.Equal(3, pool.TrimIdle()); // nobody rented in the period: two small and one large freed
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Fact]
    public void StreamDefault_FourSizes_TheSmallestThatHoldsTheRequest()
    {
        var pool = BlockMemoryPool.StreamDefault;
        Assert.Equal(BlockMemoryPool.StreamBulkBlockSize, pool.MaxBufferSize);
        using var event1 = pool.Rent(60);
        using var tinyEdge = pool.Rent(BlockMemoryPool.StreamTinyBlockSize);
        using var small1 = pool.Rent(BlockMemoryPool.StreamTinyBlockSize + 1);
        using var small = pool.Rent(BlockMemoryPool.StreamSmallBlockSize);
        using var middle = pool.Rent(BlockMemoryPool.StreamSmallBlockSize + 1);
        using var middleEdge = pool.Rent(BlockMemoryPool.StreamBlockSize);
        using var bulk = pool.Rent(BlockMemoryPool.StreamBlockSize + 1);
        using var frame = pool.Rent(16 * 1024);
        Assert.Equal(256, event1.Memory.Length);
        Assert.Equal(256, tinyEdge.Memory.Length);
        Assert.Equal(1024, small1.Memory.Length);
        Assert.Equal(1024, small.Memory.Length);
        Assert.Equal(4096, middle.Memory.Length);
        Assert.Equal(4096, middleEdge.Memory.Length);
        Assert.Equal(16 * 1024, bulk.Memory.Length);
        Assert.Equal(16 * 1024, frame.Memory.Length);
    }

    [Fact]
    public void Rent_ThreeSizes_EachComesBackToItsOwnSizeAndTrimReachesAll()
    {
        var pool = new BlockMemoryPool(16384, 1 << 20, pinned: false,
            new BlockMemoryPool(4096, 1 << 20, pinned: false, smallBlockSize: 1024, smallMaxRetainedBytes: 1 << 20));
        var blocks = new[] { pool.Rent(10), pool.Rent(2000), pool.Rent(9000) };
        var arrays = blocks.Select(b => GetArray(b.Memory)).ToArray();
        foreach (var block in blocks)
        {
            block.Dispose();
        }
        Assert.Equal(1, pool.RetainedBlocks); // the 16 KiB one; the others are kept by their own sizes
        Assert.Equal(0, pool.TrimIdle()); // a period starts
        using (var again = pool.Rent(3000))
        {
            Assert.Same(arrays[1], GetArray(again.Memory));
        }
        Assert.Equal(2, pool.TrimIdle()); // the 1 KiB and 16 KiB blocks sat unused for the period; the 4 KiB one was rented
        Assert.Equal(1, pool.TrimIdle());
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Fact]
    public async Task Sharded_BlockReturnedOnOneThread_RentedOnAnother()
    {
        // Two shards, one block: wherever the returning thread ran, a rent on any processor finds it (an empty home
        // shard takes from the others) rather than allocating.
        var pool = new BlockMemoryPool(1024, 1 << 20, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: 2);
        var block = pool.Rent();
        var array = GetArray(block.Memory);
        await Task.Run(block.Dispose).WaitAsync(Net.Patience);
        Assert.Equal(1, pool.RetainedBlocks);

        var again = await Task.Run(() => pool.Rent()).WaitAsync(Net.Patience);

        Assert.Same(array, GetArray(again.Memory));
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Theory]
    [InlineData(2, 5)]
    [InlineData(3, 4)]
    [InlineData(5, 3)]
    public void Sharded_Bound_IsThePoolsNotEachShards(int maxBlocks, int shards)
    {
        // The shards' bounds add up to the pool's: a thread that returns more than its own shard holds fills the others,
        // and nothing past the pool's bound is kept.
        var pool = new BlockMemoryPool(1024, maxBlocks * 1024L, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: shards);
        var blocks = Enumerable.Range(0, maxBlocks + 3).Select(_ => pool.Rent()).ToList();
        var arrays = blocks.Select(b => GetArray(b.Memory)).ToHashSet();
        blocks.ForEach(b => b.Dispose());

        Assert.Equal(shards, pool.Shards);
        Assert.Equal(maxBlocks, pool.RetainedBlocks);
        var again = Enumerable.Range(0, maxBlocks).Select(_ => pool.Rent()).ToList();
        Assert.All(again, b => Assert.Contains(GetArray(b.Memory), arrays)); // all kept ones reused, none allocated
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Fact]
    public void Sharded_TrimIdle_ReachesEveryShardAndTheSmallPool()
    {
        // Bounds of two blocks per shard: eight returns of each size fill all four shards whatever processor runs this.
        var pool = new BlockMemoryPool(4096, 8 * 4096, pinned: false, smallBlockSize: 1024, smallMaxRetainedBytes: 8 * 1024, shards: 4);
        Assert.Equal(4, pool.Shards);
        var blocks = Enumerable.Range(0, 16).Select(i => pool.Rent(i % 2 == 0 ? 10 : 4000)).ToList();
        blocks.ForEach(b => b.Dispose());
        Assert.Equal(8, pool.RetainedBlocks); // the large ones; the small pool keeps its own

        Assert.Equal(0, pool.TrimIdle()); // a period starts
        Assert.Equal(16, pool.TrimIdle()); // nobody rented in it: every shard of both sizes freed
        Assert.Equal(0, pool.RetainedBlocks);
    }

    [Fact]
    public async Task ThreadCache_ABlockReturnedOnAThread_IsThatThreadsNextRent_OutsideTheStacks()
    {
        var pool = new BlockMemoryPool(1024, 1 << 20, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: 2, threadCache: true);
        Assert.Equal(64, pool.ThreadBlocks); // 1 KiB blocks: 64 per thread (64 KiB)
        // On one thread of its own (a test thread may be shared with other tests' pools; this one is not): rent, return,
        // rent again.
        var (first, second, retainedBetween) = await Task.Factory.StartNew(() =>
        {
            var a = pool.Rent();
            var array = GetArray(a.Memory);
            a.Dispose();
            var retained = pool.RetainedBlocks; // kept by the thread, not in the shared stacks
            var b = pool.Rent();
            return (array, GetArray(b.Memory), retained);
        }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).WaitAsync(Net.Patience);

        Assert.Same(first, second);
        Assert.Equal(0, retainedBetween);
    }

    [Fact]
    public async Task ThreadCache_MoreReturnsThanItHolds_TheRestGoToTheStacks()
    {
        var pool = new BlockMemoryPool(16 * 1024, 1 << 24, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: 2, threadCache: true);
        var retained = await Task.Factory.StartNew(() =>
        {
            var blocks = Enumerable.Range(0, 10).Select(_ => pool.Rent()).ToList();
            blocks.ForEach(b => b.Dispose());
            return pool.RetainedBlocks;
        }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default).WaitAsync(Net.Patience);

        Assert.Equal(4, pool.ThreadBlocks); // 16 KiB blocks: 4 per thread (64 KiB)
        Assert.Equal(6, retained);           // the other six are shared, bounded and trimmed as before
        Assert.Equal(1, new BlockMemoryPool(64 * 1024, 1 << 24, pinned: false, 0, 0, shards: 1, threadCache: true).ThreadBlocks);
        Assert.Equal(0, new BlockMemoryPool().ThreadBlocks);
    }

    [Fact]
    public async Task ThreadCache_ManyThreads_NoBlockSharedBetweenRenters()
    {
        var pool = new BlockMemoryPool(64, 1 << 20, pinned: false, smallBlockSize: 0, smallMaxRetainedBytes: 0, shards: 2, threadCache: true);
        var failures = 0;
        await Task.WhenAll(Enumerable.Range(0, 4).Select(worker => Task.Run(() =>
        {
            var held = new List<IMemoryOwner<byte>>();
            for (var i = 0; i < 20_000; i++)
            {
                // Blocks rented here are returned here or, every third one, by another thread.
                var block = pool.Rent();
                block.Memory.Span.Fill((byte)worker);
                held.Add(block);
                if (held.Count == 3)
                {
                    foreach (var b in held)
                    {
                        if (b.Memory.Span.IndexOfAnyExcept((byte)worker) >= 0)
                        {
                            Interlocked.Increment(ref failures);
                        }
                    }
                    var last = held[2];
                    held[0].Dispose();
                    held[1].Dispose();
                    held.Clear();
                    ThreadPool.UnsafeQueueUserWorkItem(static b => b.Dispose(), last, preferLocal: false);
                }
            }
            held.ForEach(b => b.Dispose());
        }))).WaitAsync(Net.Patience);

        Assert.Equal(0, failures);
    }

    [Fact]
    public void SharedPools_OneShardPerProcessor()
    {
        var expected = Math.Clamp(Environment.ProcessorCount, 1, 64);
        Assert.Equal(expected, BlockMemoryPool.Default.Shards);
        Assert.Equal(expected, BlockMemoryPool.StreamDefault.Shards);
        Assert.Equal(expected, BlockMemoryPool.TlsOutputDefault.Shards);
        Assert.Equal(expected, BlockMemoryPool.InputDefault.Shards);
        Assert.Equal(1, new BlockMemoryPool().Shards); // a pool of one's own keeps the exact order
        Assert.Equal(4, BlockMemoryPool.Default.ThreadBlocks);         // 16 KiB blocks
        Assert.Equal(4, BlockMemoryPool.StreamDefault.ThreadBlocks);   // 16 KiB bulk blocks
        Assert.Equal(1, BlockMemoryPool.InputDefault.ThreadBlocks); // 64 KiB blocks: one per thread
    }

    [Fact]
    public void Constructor_SmallPoolNotSmaller_Throws()
    {
        Assert.Throws<ArgumentOutOfRangeException>(() => new BlockMemoryPool(4096, 1 << 20, pinned: false, new BlockMemoryPool(4096, 1 << 20, pinned: false)));
    }

    private static byte[] GetArray(Memory<byte> memory)
        => MemoryMarshal.TryGetArray<byte>(memory, out var segment) ? segment.Array! : throw new InvalidOperationException("not array-backed");
}
