using System.Buffers;
using System.IO.Pipelines;
using Proxy.Buffers;

namespace Proxy.Buffers.Tests;

public class SpscPipeTests
{
    private static PipeOptions Options(long pause = 0, long resume = 0, MemoryPool<byte>? pool = null, int minimumSegment = 16,
        PipeScheduler? reader = null, PipeScheduler? writer = null)
        => new(pool: pool, readerScheduler: reader ?? PipeScheduler.Inline, writerScheduler: writer ?? PipeScheduler.Inline,
            pauseWriterThreshold: pause, resumeWriterThreshold: resume, minimumSegmentSize: minimumSegment, useSynchronizationContext: false);

    private static void Write(PipeWriter writer, byte[] bytes, int blockHint = 0)
    {
        var source = bytes.AsSpan();
        while (!source.IsEmpty)
        {
            var span = writer.GetSpan(blockHint);
            var count = Math.Min(span.Length, source.Length);
            source[..count].CopyTo(span);
            writer.Advance(count);
            source = source[count..];
        }
    }

    private static byte[] Pattern(int length, int seed = 0) => Enumerable.Range(seed, length).Select(i => (byte)(i * 7 + 3)).ToArray();

    [Fact]
    public async Task WrittenAndFlushed_ReadAcrossSegments_InOrder()
    {
        var pipe = new SpscPipe(Options(minimumSegment: 16));
        var bytes = Pattern(100);
        Write(pipe.Writer, bytes, blockHint: 16); // at least seven segments
        Assert.False(pipe.Reader.TryRead(out _)); // nothing flushed yet
        Assert.Equal(100, pipe.Writer.UnflushedBytes);
        await pipe.Writer.FlushAsync();
        Assert.Equal(0, pipe.Writer.UnflushedBytes);

        var read = await pipe.Reader.ReadAsync();

        Assert.False(read.Buffer.IsSingleSegment);
        Assert.Equal(bytes, read.Buffer.ToArray());
        Assert.False(read.IsCompleted);
        Assert.False(read.IsCanceled);
        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(30));
        Assert.True(pipe.Reader.TryRead(out read));
        Assert.Equal(bytes[30..], read.Buffer.ToArray());
        pipe.Reader.AdvanceTo(read.Buffer.End);
        Assert.False(pipe.Reader.TryRead(out _));
    }

    [Fact]
    public async Task ReadAsync_AfterEverythingExamined_WaitsForTheNextFlush()
    {
        var pipe = new SpscPipe(Options());
        Write(pipe.Writer, Pattern(10));
        await pipe.Writer.FlushAsync();
        var read = await pipe.Reader.ReadAsync();
        pipe.Reader.AdvanceTo(read.Buffer.Start, read.Buffer.End); // examined all, consumed none

        Assert.False(pipe.Reader.TryRead(out _)); // as Pipe: examined bytes are not news
        var next = pipe.Reader.ReadAsync();
        Assert.False(next.IsCompleted);
        Write(pipe.Writer, Pattern(5, seed: 10));
        await pipe.Writer.FlushAsync();

        read = await next;
        Assert.Equal(Pattern(15), read.Buffer.ToArray());
    }

    [Fact]
    public async Task ReadAsync_WithPartOnlyExamined_CompletesAtOnce()
    {
        var pipe = new SpscPipe(Options());
        Write(pipe.Writer, Pattern(10));
        await pipe.Writer.FlushAsync();
        var read = await pipe.Reader.ReadAsync();
        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(2), read.Buffer.GetPosition(6));

        var next = pipe.Reader.ReadAsync();

        Assert.True(next.IsCompletedSuccessfully);
        Assert.Equal(Pattern(10)[2..], (await next).Buffer.ToArray());
    }

    [Fact]
    public async Task WriterCompleted_ReaderGetsTheUnflushedBytesAndTheEnd()
    {
        var pipe = new SpscPipe(Options());
        var waiting = pipe.Reader.ReadAsync();
        Write(pipe.Writer, Pattern(8));
        pipe.Writer.Complete(); // commits what was written, as Pipe does

        var read = await waiting;

        Assert.True(read.IsCompleted);
        Assert.Equal(Pattern(8), read.Buffer.ToArray());
        pipe.Reader.AdvanceTo(read.Buffer.End);
        read = await pipe.Reader.ReadAsync();
        Assert.True(read.IsCompleted);
        Assert.True(read.Buffer.IsEmpty);
    }

    [Fact]
    public async Task WriterCompletedWithError_ReadRethrowsIt()
    {
        var pipe = new SpscPipe(Options());
        var waiting = pipe.Reader.ReadAsync();
        var error = new IOException("stream reset");

        pipe.Writer.Complete(error);

        Assert.Same(error, await Assert.ThrowsAsync<IOException>(async () => await waiting));
        Assert.Same(error, Assert.Throws<IOException>(() => pipe.Reader.TryRead(out _)));
    }

    [Fact]
    public async Task ReaderCompleted_FlushReportsIt_AndLaterWritesAreDropped()
    {
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 64));
        Write(pipe.Writer, Pattern(10));
        await pipe.Writer.FlushAsync();
        pipe.Reader.Complete();

        for (var i = 0; i < 100; i++)
        {
            Write(pipe.Writer, Pattern(50));
            var flush = await pipe.Writer.FlushAsync();
            Assert.True(flush.IsCompleted);
        }
        // Dropped bytes are written over: the writer still holds its one block.
        Assert.Equal(0, pool.Returned);
        pipe.Writer.Complete();
        Assert.Equal(1, pool.Returned); // both ends completed: the block went back
    }

    [Fact]
    public async Task ReaderCompletedWithError_FlushRethrowsIt()
    {
        var pipe = new SpscPipe(Options());
        var error = new InvalidOperationException("the app stopped reading");
        pipe.Reader.Complete(error);
        Write(pipe.Writer, Pattern(3));

        Assert.Same(error, await Assert.ThrowsAsync<InvalidOperationException>(async () => await pipe.Writer.FlushAsync()));
    }

    [Fact]
    public async Task CancelPendingRead_WakesAWaitingRead_OrTheNextOne()
    {
        var pipe = new SpscPipe(Options());
        var waiting = pipe.Reader.ReadAsync();
        pipe.Reader.CancelPendingRead();
        var read = await waiting;
        Assert.True(read.IsCanceled);
        pipe.Reader.AdvanceTo(read.Buffer.Start);

        pipe.Reader.CancelPendingRead(); // nothing waits: the next read is the cancelled one
        read = await pipe.Reader.ReadAsync();
        Assert.True(read.IsCanceled);
        pipe.Reader.AdvanceTo(read.Buffer.Start);

        Assert.False(pipe.Reader.ReadAsync().IsCompleted); // the cancel was observed once
    }

    [Fact]
    public async Task ReadAsync_TokenFires_ThrowsOperationCanceled_AndThePipeReadsOn()
    {
        var pipe = new SpscPipe(Options());
        using var cts = new CancellationTokenSource();
        var waiting = pipe.Reader.ReadAsync(cts.Token);

        cts.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () => await waiting);
        var next = pipe.Reader.ReadAsync();
        Write(pipe.Writer, Pattern(4));
        await pipe.Writer.FlushAsync();
        Assert.Equal(Pattern(4), (await next).Buffer.ToArray());
    }

    [Fact]
    public async Task Flush_PastThePauseThreshold_WaitsUntilTheReaderGoesBelowResume()
    {
        var pipe = new SpscPipe(Options(pause: 100, resume: 50));
        Write(pipe.Writer, Pattern(99));
        Assert.True(pipe.Writer.FlushAsync().IsCompletedSuccessfully);
        Write(pipe.Writer, Pattern(1));
        var flush = pipe.Writer.FlushAsync();
        Assert.False(flush.IsCompleted);

        var read = await pipe.Reader.ReadAsync();
        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(40)); // 60 left: still at or above resume
        Assert.False(flush.IsCompleted);
        Assert.True(pipe.Reader.TryRead(out read));
        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(20)); // 40 left

        var result = await flush;
        Assert.False(result.IsCanceled);
        Assert.False(result.IsCompleted);
    }

    [Fact]
    public async Task CancelPendingFlush_ReleasesAWaitingFlush_AndReaderCompletionToo()
    {
        var pipe = new SpscPipe(Options(pause: 10, resume: 5));
        Write(pipe.Writer, Pattern(10));
        var flush = pipe.Writer.FlushAsync();
        Assert.False(flush.IsCompleted);
        pipe.Writer.CancelPendingFlush();
        Assert.True((await flush).IsCanceled);

        flush = pipe.Writer.FlushAsync();
        Assert.False(flush.IsCompleted);
        pipe.Reader.Complete();
        Assert.True((await flush).IsCompleted);
    }

    [Fact]
    public async Task FlushAsync_TokenFires_ThrowsOperationCanceled()
    {
        var pipe = new SpscPipe(Options(pause: 10, resume: 5));
        using var cts = new CancellationTokenSource();
        Write(pipe.Writer, Pattern(10));
        var flush = pipe.Writer.FlushAsync(cts.Token);
        Assert.False(flush.IsCompleted);

        cts.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () => await flush);
    }

    [Fact]
    public async Task Reset_NeedsBothEndsCompleted_ThenStartsOver()
    {
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 64));
        Write(pipe.Writer, Pattern(200));
        await pipe.Writer.FlushAsync();
        Assert.Throws<InvalidOperationException>(pipe.Reset);
        pipe.Writer.Complete();
        Assert.Throws<InvalidOperationException>(pipe.Reset);
        pipe.Reader.Complete();
        Assert.Equal(4, pool.Returned); // 200 bytes in 64-byte blocks went back

        pipe.Reset();

        Assert.False(pipe.Reader.TryRead(out _));
        Write(pipe.Writer, Pattern(3, seed: 9));
        await pipe.Writer.FlushAsync();
        var read = await pipe.Reader.ReadAsync();
        Assert.Equal(Pattern(3, seed: 9), read.Buffer.ToArray());
    }

    [Fact]
    public async Task ConsumedBlocks_GoBackToThePool_WhileTheWriterGoesOn()
    {
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 64));
        Write(pipe.Writer, Pattern(64 * 3));
        await pipe.Writer.FlushAsync();
        var read = await pipe.Reader.ReadAsync();

        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(130));

        Assert.Equal(2, pool.Returned); // the two blocks wholly consumed; the third holds unread bytes
    }

    /// <summary>Writes, flushes, reads and consumes <paramref name="messages"/> 20-byte messages in turn: each read is one segment holding that message.</summary>
    private static async Task WriteAndDrainAsync(SpscPipe pipe, int messages)
    {
        for (var i = 0; i < messages; i++)
        {
            Write(pipe.Writer, Pattern(20, seed: i));
            await pipe.Writer.FlushAsync();
            var read = await pipe.Reader.ReadAsync();
            Assert.True(read.Buffer.IsSingleSegment);
            Assert.Equal(Pattern(20, seed: i), read.Buffer.ToArray());
            pipe.Reader.AdvanceTo(read.Buffer.End);
        }
    }

    [Fact]
    public async Task AfterTheReaderConsumedEverything_TheNextWriteIsOneSegment_OverTheSameBlock()
    {
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 64));
        // Each write would fit in what is left of the first block; a reader that drained it makes the writer start over
        // at the block's first byte, so every read is one segment (one send(2) for a socket) and no block changes hands.
        await WriteAndDrainAsync(pipe, 10);
        Assert.Equal(1, pool.Rented);
        Assert.Equal(0, pool.Returned);

        pipe.Writer.Complete();
        pipe.Reader.Complete();
        Assert.Equal(1, pool.Returned); // once (the pool's block checks that), though ten segments held it in turn
    }

    [Fact]
    public async Task AfterTheReaderConsumedEverything_ABlockFourTimesTooLarge_GoesBack()
    {
        // 256-byte blocks for writes that need 16 (the minimum segment): an idle stream should not keep a block that much
        // larger than what it writes, so each drained block goes back and the next write takes a fresh one.
        var pool = new CountingPool(256);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 16));
        await WriteAndDrainAsync(pipe, 10);
        Assert.Equal(10, pool.Rented);
        Assert.Equal(9, pool.Returned); // every drained block but the last, still the writer's

        pipe.Writer.Complete();
        pipe.Reader.Complete();
        Assert.Equal(10, pool.Returned);
    }

    [Fact]
    public async Task RewoundBlock_ReadPartly_IsNotWrittenOver()
    {
        // The writer starts over only when every flushed byte was consumed: a reader that left a byte keeps the block's
        // bytes, and the next write goes after them.
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 64));
        Write(pipe.Writer, Pattern(20));
        await pipe.Writer.FlushAsync();
        var read = await pipe.Reader.ReadAsync();
        pipe.Reader.AdvanceTo(read.Buffer.End); // drained: the next write starts over
        Write(pipe.Writer, Pattern(20, seed: 1));
        await pipe.Writer.FlushAsync();
        read = await pipe.Reader.ReadAsync();
        pipe.Reader.AdvanceTo(read.Buffer.GetPosition(19)); // one byte left
        Write(pipe.Writer, Pattern(20, seed: 2));
        await pipe.Writer.FlushAsync();

        read = await pipe.Reader.ReadAsync();

        Assert.Equal(Pattern(20, seed: 1)[19..].Concat(Pattern(20, seed: 2)), read.Buffer.ToArray());
        Assert.Equal(1, pool.Rented);
    }

    [Fact]
    public void GetMemory_LargerThanThePoolsBlocks_ServedFromArrayPool()
    {
        var pool = new CountingPool(64);
        var pipe = new SpscPipe(Options(pool: pool, minimumSegment: 16));

        var memory = pipe.Writer.GetMemory(1000);

        Assert.True(memory.Length >= 1000);
        Assert.Equal(0, pool.Rented);
    }

    [Fact]
    public void Constructor_SynchronizationContextAsked_Refused()
    {
        var error = Assert.Throws<ArgumentException>(() => new SpscPipe(new PipeOptions(useSynchronizationContext: true)));
        Assert.Contains("UseSynchronizationContext", error.Message);
    }

    [Fact]
    public async Task AsAPipeWould_RandomOperations_GiveTheSameReads()
    {
        // The same random script on a Pipe and on an SpscPipe, one thread: every TryRead and flush result must agree.
        for (var seed = 0; seed < 40; seed++)
        {
            var random = new Random(seed);
            var options = Options(pause: 300, resume: 150, minimumSegment: 32);
            var reference = new Pipe(options);
            var pipe = new SpscPipe(options);
            var written = 0;
            for (var step = 0; step < 200; step++)
            {
                switch (random.Next(5))
                {
                    case 0:
                    case 1:
                        var bytes = Pattern(random.Next(1, 120), written);
                        written += bytes.Length;
                        var hint = random.Next(0, 64);
                        Write(reference.Writer, bytes, hint);
                        Write(pipe.Writer, bytes, hint);
                        break;
                    case 2:
                        var a = reference.Writer.FlushAsync();
                        var b = pipe.Writer.FlushAsync();
                        Assert.Equal(a.IsCompleted, b.IsCompleted);
                        if (!a.IsCompleted)
                        {
                            // Both wait on the reader: drain both and compare what the flushes say.
                            Drain(reference.Reader);
                            Drain(pipe.Reader);
                            var ra = await a;
                            var rb = await b;
                            Assert.Equal((ra.IsCanceled, ra.IsCompleted), (rb.IsCanceled, rb.IsCompleted));
                        }
                        break;
                    default:
                        var ta = reference.Reader.TryRead(out var readA);
                        var tb = pipe.Reader.TryRead(out var readB);
                        Assert.Equal(ta, tb);
                        if (ta)
                        {
                            Assert.Equal(readA.Buffer.ToArray(), readB.Buffer.ToArray());
                            Assert.Equal((readA.IsCanceled, readA.IsCompleted), (readB.IsCanceled, readB.IsCompleted));
                            var consume = random.Next(0, (int)readA.Buffer.Length + 1);
                            var examine = random.Next(consume, (int)readA.Buffer.Length + 1);
                            reference.Reader.AdvanceTo(readA.Buffer.GetPosition(consume), readA.Buffer.GetPosition(examine));
                            pipe.Reader.AdvanceTo(readB.Buffer.GetPosition(consume), readB.Buffer.GetPosition(examine));
                        }
                        break;
                }
            }
        }

        static void Drain(PipeReader reader)
        {
            Assert.True(reader.TryRead(out var read));
            reader.AdvanceTo(read.Buffer.End);
        }
    }

    [Theory]
    [InlineData(false, 0)]
    [InlineData(true, 0)]
    [InlineData(false, 512)]
    [InlineData(true, 512)]
    public async Task TwoThreads_EveryByteArrivesInOrder(bool threadPoolSchedulers, int pause)
    {
        // A writer and a reader on their own threads, with waits on both sides (empty pipe, full pipe): the reader must get
        // exactly the bytes written, in order, and the two must never hang. Each await here is on the other end's progress.
        const int Total = 2_000_000;
        var pool = new CountingPool(256);
        var scheduler = threadPoolSchedulers ? PipeScheduler.ThreadPool : PipeScheduler.Inline;
        var pipe = new SpscPipe(Options(pause: pause, resume: pause / 2, pool: pool, minimumSegment: 64, reader: scheduler, writer: scheduler));

        var writer = Task.Run(async () =>
        {
            var random = new Random(1);
            var sent = 0;
            while (sent < Total)
            {
                var chunk = Math.Min(Total - sent, random.Next(1, 700));
                var bytes = new byte[chunk];
                for (var i = 0; i < chunk; i++)
                {
                    bytes[i] = (byte)(sent + i);
                }
                Write(pipe.Writer, bytes, random.Next(0, 300));
                sent += chunk;
                if (random.Next(3) != 0)
                {
                    await pipe.Writer.FlushAsync();
                }
            }
            pipe.Writer.Complete();
        });

        var reader = Task.Run(async () =>
        {
            var random = new Random(2);
            long received = 0;
            while (true)
            {
                var read = await pipe.Reader.ReadAsync();
                var buffer = read.Buffer;
                var take = read.IsCompleted ? buffer.Length : random.Next(0, (int)Math.Min(buffer.Length, 900) + 1);
                foreach (var segment in buffer.Slice(0, take))
                {
                    foreach (var b in segment.Span)
                    {
                        Assert.Equal((byte)received, b);
                        received++;
                    }
                }
                if (read.IsCompleted && take == buffer.Length)
                {
                    pipe.Reader.AdvanceTo(buffer.End);
                    break;
                }
                // Examining everything while the writer waits for room would hang both (as with Pipe): only below resume.
                var examined = pause == 0 || buffer.Length - take < pause / 2 ? buffer.End : buffer.GetPosition(take);
                pipe.Reader.AdvanceTo(buffer.GetPosition(take), examined);
            }
            pipe.Reader.Complete();
            return received;
        });

        await writer;
        Assert.Equal(Total, await reader);
    }

    /// <summary>Blocks of one size that count what was rented and given back.</summary>
    private sealed class CountingPool(int blockSize) : MemoryPool<byte>
    {
        private int _rented;
        private int _returned;

        public int Rented => Volatile.Read(ref _rented);
        public int Returned => Volatile.Read(ref _returned);
        public override int MaxBufferSize => blockSize;

        public override IMemoryOwner<byte> Rent(int minBufferSize = -1)
        {
            Assert.True(minBufferSize <= blockSize);
            Interlocked.Increment(ref _rented);
            return new Block(this, new byte[blockSize]);
        }

        protected override void Dispose(bool disposing) { }

        private sealed class Block(CountingPool pool, byte[] array) : IMemoryOwner<byte>
        {
            private bool _disposed;
            public Memory<byte> Memory => _disposed ? throw new ObjectDisposedException(nameof(Block)) : array;

            public void Dispose()
            {
                Assert.False(_disposed); // a block goes back once
                _disposed = true;
                Interlocked.Increment(ref pool._returned);
            }
        }
    }
}
