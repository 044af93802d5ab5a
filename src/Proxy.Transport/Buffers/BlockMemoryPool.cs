using System.Runtime.InteropServices;

namespace Proxy.Transport.Buffers;

// Thread-safe: any thread rents, any thread returns (by disposing the block it rented).
/// <summary>
/// A pool of fixed-size blocks: pinned ones for output pipes (<see cref="Default"/>), small unpinned ones for HTTP/2
/// stream pipes (<see cref="StreamDefault"/>). A returned block is kept for the next renter, up to a bound on the bytes
/// kept, so a connection that buffers megabytes of response reuses blocks instead of allocating them; blocks left
/// unused for a period are freed (<see cref="TrimIdle"/>).
/// NOTE: this is why output pipes do not use the default pool (<see cref="ArrayPool{T}.Shared"/>): it keeps
/// about 32 arrays per size per core. One connection's output pipe may hold 1 MiB (64 such arrays), so a few
/// busy connections miss it on nearly every segment; measured on a 10 MB static file the server allocated 10 MB
/// (HTTP/1.1) to 19 MB (HTTP/1.1 over TLS) per response, and spent a fifth of its CPU time in the GC.
/// </summary>
public sealed class BlockMemoryPool : MemoryPool<byte>
{
    /// <summary>16 KiB: the largest TLS record's payload, and a DATA frame of the default SETTINGS_MAX_FRAME_SIZE.</summary>
    public const int DefaultBlockSize = 16 * 1024;

    /// <summary>Bytes kept for reuse by default: the output of about 64 connections at 1 MiB each.</summary>
    public const long DefaultMaxRetainedBytes = 64L * 1024 * 1024;

    /// <summary>4 KiB: the middle block of <see cref="StreamDefault"/> (Kestrel's block size too).</summary>
    public const int StreamBlockSize = 4 * 1024;

    /// <summary>How often <see cref="Default"/> frees the blocks no renter asked for since the last time.</summary>
    public static readonly TimeSpan DefaultIdleTrimPeriod = TimeSpan.FromSeconds(10);

    // NOTE: one stack of free blocks per shard, each under its own lock. A rent or a return goes to the shard of the
    // processor it runs on, so the two epoll threads of a 2-core machine never wait for each other: with one lock for
    // the whole pool, GET 100 KB over TLS spent 3% of the proxy's CPU spinning in Lock.Enter under Rent (SslStream's
    // records written into the socket's output pipe on both threads at once). A shard that is empty on a rent takes
    // from another, and one that is full on a return gives to another, so the bound and the reuse stay the pool's.
    private readonly Shard[] _shards;
    // Serves rents of at most its block size (a pool of two sizes), or null.
    private readonly BlockMemoryPool? _small;
    private readonly int _blockSize;
    private readonly bool _pinned;

    /// <summary>
    /// Creates a pool of <paramref name="blockSize"/>-byte blocks keeping at most <paramref name="maxRetainedBytes"/> for
    /// reuse; <paramref name="pinned"/> blocks live on the pinned object heap (for buffers handed to sockets).
    /// </summary>
    /// <remarks>
    /// With <paramref name="smallBlockSize"/> &gt; 0, rents of at most that many bytes come from blocks of that size, of
    /// which at most <paramref name="smallMaxRetainedBytes"/> are kept.
    /// </remarks>
    public BlockMemoryPool(int blockSize = DefaultBlockSize, long maxRetainedBytes = DefaultMaxRetainedBytes, bool pinned = true,
        int smallBlockSize = 0, long smallMaxRetainedBytes = 0)
        : this(blockSize, maxRetainedBytes, pinned, smallBlockSize, smallMaxRetainedBytes, shards: 1)
    {
    }

    /// <summary>
    /// As the constructor above, with the free blocks kept in <paramref name="shards"/> stacks (the small pool's too):
    /// threads on different processors rent and return without waiting for each other. Use
    /// <see cref="Environment.ProcessorCount"/> for a pool that every connection shares; one shard keeps the pool's
    /// order exact (last returned, first rented) whatever processor a thread runs on.
    /// </summary>
    /// <param name="threadCache">Also keep a few free blocks per thread (see <see cref="ThreadBlocks"/>), the small pool too.</param>
    public BlockMemoryPool(int blockSize, long maxRetainedBytes, bool pinned, int smallBlockSize, long smallMaxRetainedBytes, int shards,
        bool threadCache = false)
        : this(blockSize, maxRetainedBytes, pinned, SmallPool(smallBlockSize, smallMaxRetainedBytes, pinned, shards, threadCache), shards, threadCache)
    {
    }

    /// <summary>
    /// Creates a pool of <paramref name="blockSize"/>-byte blocks whose rents of at most <paramref name="small"/>'s block
    /// size go to <paramref name="small"/> (which may itself have a smaller pool: three or more sizes).
    /// </summary>
    public BlockMemoryPool(int blockSize, long maxRetainedBytes, bool pinned, BlockMemoryPool? small)
        : this(blockSize, maxRetainedBytes, pinned, small, shards: 1)
    {
    }

    /// <summary>As the constructor above, with the free blocks kept in <paramref name="shards"/> stacks (see <see cref="Shards"/>).</summary>
    /// <param name="threadCache">Also keep a few free blocks per thread (see <see cref="ThreadBlocks"/>).</param>
    public BlockMemoryPool(int blockSize, long maxRetainedBytes, bool pinned, BlockMemoryPool? small, int shards, bool threadCache = false)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(blockSize, 1);
        ArgumentOutOfRangeException.ThrowIfNegative(maxRetainedBytes);
        ArgumentOutOfRangeException.ThrowIfLessThan(shards, 1);
        if (small is not null)
        {
            ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(small._blockSize, blockSize, nameof(small));
        }
        _small = small;
        _pinned = pinned;
        _blockSize = blockSize;
        // The bound is split so that the shards' bounds add up to the pool's exactly.
        var maxRetainedBlocks = (int)Math.Min(int.MaxValue, maxRetainedBytes / blockSize);
        _shards = new Shard[shards];
        for (var i = 0; i < shards; i++)
        {
            _shards[i] = new Shard(maxRetainedBlocks / shards + (i < maxRetainedBlocks % shards ? 1 : 0));
        }
        if (threadCache)
        {
            var slot = Interlocked.Increment(ref s_threadSlots) - 1;
            if (slot < MaxThreadSlots)
            {
                _threadSlot = slot;
                ThreadBlocks = Math.Clamp(MaxThreadCacheBytes / blockSize, 1, MaxThreadBlocks);
            }
        }
    }

    private static BlockMemoryPool? SmallPool(int smallBlockSize, long smallMaxRetainedBytes, bool pinned, int shards, bool threadCache = false)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(smallBlockSize);
        return smallBlockSize > 0 ? new BlockMemoryPool(smallBlockSize, smallMaxRetainedBytes, pinned, small: null, shards, threadCache) : null;
    }

    // NOTE: a thread's own few free blocks, before the shards: a connection's writer rents a block, its send returns it on
    // the same epoll thread, and the next write rents it again, with no lock, no processor lookup and no stack. The
    // shards' locks were 1-3% of the proxy's CPU (GET and POST 1 KB h2c, GET 100 KB over TLS) though nothing waited on
    // them. Blocks a thread keeps are outside the pool's bound and its idle trim (at most 64 KiB per thread per size),
    // and not counted in RetainedBlocks.
    [ThreadStatic]
    private static ThreadFree?[]? t_free;
    private static int s_threadSlots;
    private const int MaxThreadSlots = 64;
    private const int MaxThreadCacheBytes = 64 * 1024;
    // NOTE: as many as a batch of socket events takes before its sends return them (the sends wait for the end of the
    // batch): with 4 per thread, half the rents of a 16x16 POST load still went to the shards.
    private const int MaxThreadBlocks = 64;
    private readonly int _threadSlot = -1;

    /// <summary>Free blocks each thread keeps for itself (0: none): up to 64 of them, and no more than 64 KiB.</summary>
    public int ThreadBlocks { get; }

    /// <summary>How many stacks the free blocks are kept in: rents and returns go to the running processor's.</summary>
    public int Shards => _shards.Length;

    /// <summary>The shard count of the shared pools: one per processor, at most 64.</summary>
    private static int SharedShards => Math.Clamp(Environment.ProcessorCount, 1, 64);

    /// <summary>
    /// The pool the server's output pipes share unless configured otherwise. It frees blocks left unused for a
    /// <see cref="DefaultIdleTrimPeriod"/>: a burst (20,000 streams starting at once) otherwise left 64 MB kept
    /// for good. Rents of up to 4 KiB (a pipe's default minimum segment, and every write hinted that small) get a 4 KiB
    /// pinned block: an SSE broadcast has every connection write an event at once, and each kept a 16 KiB block of
    /// its socket's output pipe, 32 MB at 2,000 connections. Receives (minimum 8 KiB) and larger writes get 16 KiB.
    /// </summary>
    public static BlockMemoryPool Default { get; } = CreateWithIdleTrim(DefaultIdleTrimPeriod, DefaultBlockSize, DefaultMaxRetainedBytes, pinned: true,
        smallBlockSize: StreamBlockSize, smallMaxRetainedBytes: DefaultSmallMaxRetainedBytes, shards: SharedShards, threadCache: true);

    /// <summary>
    /// The pool of HTTP/2 streams' request and response pipes (server and relay): 256-byte, 1, 4 and 16 KiB blocks, none
    /// pinned, idle ones freed as in <see cref="Default"/>. Of the 4 KiB blocks at most 64 MiB are kept; rents of more
    /// than 4 KiB (a full DATA frame, a relay's bulk chunk) get a 16 KiB block, at most 32 MiB of which are kept. The
    /// bound is wide because a broadcast puts a block in every stream's pipe at once: with 16 MiB, 94,000 blocks dropped
    /// in one run of 20,000 SSE streams survived a young collection while in flight and piled up in generation 1; kept
    /// ones are freed when the bursts stop.
    /// NOTE: a stream's pipe holds a block only while bytes pass through it, but SSE broadcasts make those moments
    /// coincide: 20,000 streams each got an event in the same millisecond, and with 16 KiB pinned blocks (the output
    /// pool) each event of a few dozen bytes took a block; past the kept bound they became pinned-heap garbage that
    /// only a full collection frees. Small unpinned blocks cost a quarter and die young.
    /// </summary>
    /// <remarks>
    /// NOTE: rents of up to <see cref="StreamSmallBlockSize"/> get a 1 KiB block, and rents of up to
    /// <see cref="StreamTinyBlockSize"/> a 256-byte one (the stream pipes ask for what they write, see
    /// <see cref="SmallBlockSize"/>). At 20,000 SSE streams each event of a few dozen bytes took a 4 KiB block in the
    /// backend stream's pipe and another in the client stream's; the bursts kept 64 MB of them. With 1 KiB blocks a
    /// broadcast still took 40,000 blocks at once, past the 16 MiB kept: the 1 KiB tier stayed full (1.25 KB per stream)
    /// and the rest was garbage each second. 256-byte blocks for such events: 10 MB for the whole broadcast, all of it
    /// kept within the bound. Five runs of 20,000 streams against five of the build before, alternated: 17.6-18.5 KB per
    /// stream (RSS, mean of the measured period) against 18.7-21.7, CPU per event 10.8-11.8 µs against 11.3-12.8.
    /// </remarks>
    /// <remarks>
    /// NOTE: the 16 KiB tier is for bulk bodies. A 100 KB response relayed to an HTTP/2 client went through 25 blocks of
    /// 4 KiB: a pipe segment, a rent and a return under the pool's lock each, and the writer loop gathered every 16 KiB
    /// DATA frame from four of them. Writers hint a 16 KiB block only for a whole 16 KiB of bytes
    /// (<see cref="StreamBulkBlockSize"/>), so a quiet stream or a small message never holds one.
    /// </remarks>
    public static BlockMemoryPool StreamDefault { get; } = WithIdleTrim(DefaultIdleTrimPeriod,
        new BlockMemoryPool(StreamBulkBlockSize, 32L * 1024 * 1024, pinned: false,
            new BlockMemoryPool(StreamBlockSize, 64L * 1024 * 1024, pinned: false,
                new BlockMemoryPool(StreamSmallBlockSize, DefaultSmallMaxRetainedBytes, pinned: false,
                    smallBlockSize: StreamTinyBlockSize, smallMaxRetainedBytes: DefaultSmallMaxRetainedBytes, shards: SharedShards, threadCache: true),
                SharedShards, threadCache: true),
            SharedShards, threadCache: true));

    /// <summary>256 bytes: the smallest block of <see cref="StreamDefault"/> (an SSE event, a small gRPC message), and the stream pipes' minimum segment.</summary>
    public const int StreamTinyBlockSize = 256;

    /// <summary>16 KiB: the bulk block of <see cref="StreamDefault"/> (a DATA frame of the default SETTINGS_MAX_FRAME_SIZE).</summary>
    public const int StreamBulkBlockSize = 16 * 1024;

    /// <summary>
    /// The pool of TLS connections' output pipes (the plaintext before encryption): 4 KiB blocks for rents up to 4 KiB,
    /// 16 KiB above, none pinned (SslStream encrypts from them into its own buffer; the socket never sees them), idle
    /// ones freed as in <see cref="Default"/>.
    /// </summary>
    /// <remarks>
    /// NOTE: with <see cref="Default"/>'s 16 KiB pinned blocks, an SSE broadcast (every connection writing an event at
    /// once) kept one block per connection: 32 MB at 2,000 TLS connections, 1.6 KB per stream. The writer's frames
    /// are copied into 64 KiB writes by the output pump, so smaller blocks cost no extra TLS record.
    /// </remarks>
    public static BlockMemoryPool TlsOutputDefault { get; } = CreateWithIdleTrim(DefaultIdleTrimPeriod, DefaultBlockSize, DefaultMaxRetainedBytes, pinned: false,
        smallBlockSize: StreamBlockSize, smallMaxRetainedBytes: DefaultSmallMaxRetainedBytes, shards: SharedShards, threadCache: true);

    /// <summary>
    /// The pool of sockets' input pipes: 16 KiB pinned blocks for a receive (at least 8 KiB is asked for), 64 KiB ones for
    /// the rest of a receive batch (a receive that filled its block is followed by one for up to 64 KiB in all), idle
    /// ones freed as in <see cref="Default"/>.
    /// </summary>
    /// <remarks>
    /// NOTE: a 100 KB response took 7 receives of up to 16 KiB; with the rest of each batch in one receive into a 64 KiB
    /// block it takes 3, and a batch still ends at 64 KiB, one relay chunk. An idle or slow connection never holds a large
    /// block: it waits for data before it takes one, and a receive that does not fill 16 KiB ends its batch.
    /// </remarks>
    public static BlockMemoryPool InputDefault { get; } = CreateWithIdleTrim(DefaultIdleTrimPeriod, LargeInputBlockSize, DefaultMaxRetainedBytes, pinned: true,
        smallBlockSize: DefaultBlockSize, smallMaxRetainedBytes: DefaultMaxRetainedBytes, shards: SharedShards, threadCache: true);

    /// <summary>64 KiB: the large block of <see cref="InputDefault"/>.</summary>
    public const int LargeInputBlockSize = 64 * 1024;

    /// <summary>Small blocks the shared pools keep for reuse: 16 MiB.</summary>
    public const long DefaultSmallMaxRetainedBytes = 16L * 1024 * 1024;

    /// <summary>1 KiB: the small block of <see cref="StreamDefault"/>.</summary>
    public const int StreamSmallBlockSize = 1024;

    /// <summary>
    /// Rents of at most this many bytes go to the next smaller size (a block of this size, or a smaller one when that
    /// pool has sizes of its own) instead of <see cref="MaxBufferSize"/>; 0 when the pool has one size. A pipe rents max(its minimum segment size, the writer's size hint): give such a pipe this as
    /// its minimum segment size and write with hints.
    /// </summary>
    public int SmallBlockSize => _small?._blockSize ?? 0;

    /// <summary>A pool that runs <see cref="TrimIdle"/> every <paramref name="period"/> for as long as it is referenced.</summary>
    public static BlockMemoryPool CreateWithIdleTrim(TimeSpan period, int blockSize = DefaultBlockSize, long maxRetainedBytes = DefaultMaxRetainedBytes, bool pinned = true,
        int smallBlockSize = 0, long smallMaxRetainedBytes = 0, int shards = 1, bool threadCache = false)
        => WithIdleTrim(period, new BlockMemoryPool(blockSize, maxRetainedBytes, pinned, smallBlockSize, smallMaxRetainedBytes, shards, threadCache));

    /// <summary>Runs <see cref="TrimIdle"/> on <paramref name="pool"/> (and its smaller pools) every <paramref name="period"/> while it is referenced.</summary>
    private static BlockMemoryPool WithIdleTrim(TimeSpan period, BlockMemoryPool pool)
    {
        // The timer holds the pool weakly, so an unreferenced pool is collected and its timer then stops itself.
        var target = new WeakReference<BlockMemoryPool>(pool);
        Timer? timer = null;
        timer = new Timer(_ =>
        {
            if (target.TryGetTarget(out var p))
            {
                p.TrimIdle();
            }
            else
            {
                timer?.Dispose();
            }
        }, null, period, period);
        return pool;
    }

    /// <summary>Every block has this size; a pipe asks <see cref="ArrayPool{T}.Shared"/> for anything larger.</summary>
    public override int MaxBufferSize => _blockSize;

    /// <summary>Blocks currently kept for reuse (tests, diagnostics).</summary>
    public int RetainedBlocks
    {
        get
        {
            var count = 0;
            foreach (var shard in _shards)
            {
                lock (shard.Lock)
                {
                    count += shard.Count;
                }
            }
            return count;
        }
    }

    public override IMemoryOwner<byte> Rent(int minBufferSize = -1)
    {
        ArgumentOutOfRangeException.ThrowIfGreaterThan(minBufferSize, _blockSize);
        if (_small is not null && minBufferSize > 0 && minBufferSize <= _small._blockSize)
        {
            return _small.Rent(minBufferSize);
        }
        if (_threadSlot >= 0 && t_free?[_threadSlot] is { } own && own.TryPop() is { } kept)
        {
            kept.Lease();
            return kept;
        }
        var home = HomeShard();
        var block = _shards[home].TryPop();
        for (var i = 1; block is null && i < _shards.Length; i++)
        {
            block = _shards[(home + i) % _shards.Length].TryPop();
        }
        if (block is not null)
        {
            block.Lease();
            return block;
        }
        // A pinned pool allocates on the pinned object heap: sockets pin output buffers for every send anyway, and
        // pinning long-lived blocks in the ordinary heap would fragment it. Stream pipes' blocks are never handed to a
        // socket, so their pool (StreamDefault) allocates ordinary arrays the GC can compact and collect young.
        return new Block(this, GC.AllocateUninitializedArray<byte>(_blockSize, pinned: _pinned), _pinned);
    }

    private void Return(Block block)
    {
        if (_threadSlot >= 0)
        {
            var all = t_free ??= new ThreadFree?[MaxThreadSlots];
            var own = all[_threadSlot] ??= new ThreadFree(ThreadBlocks);
            if (own.TryPush(block))
            {
                return;
            }
        }
        var home = HomeShard();
        for (var i = 0; i < _shards.Length; i++)
        {
            if (_shards[(home + i) % _shards.Length].TryPush(block))
            {
                return;
            }
        }
        // else over the bound: the GC takes it
    }

    private int HomeShard() => _shards.Length == 1 ? 0 : Thread.GetCurrentProcessorId() % _shards.Length;

    /// <summary>
    /// Frees the kept blocks that no renter took since the previous call (the bottom of each shard's stack: it is last
    /// in, first out, so those are the ones that stayed put), and starts a new period. Returns how many were freed.
    /// </summary>
    public int TrimIdle()
    {
        var freed = _small?.TrimIdle() ?? 0;
        foreach (var shard in _shards)
        {
            freed += shard.TrimIdle();
        }
        return freed;
    }

    /// <summary>Nothing to release: blocks are managed arrays; rented ones stay valid until their renters dispose them.</summary>
    protected override void Dispose(bool disposing)
    {
    }

    // Owned by one thread (a [ThreadStatic] slot).
    /// <summary>A thread's own free blocks of one pool: a stack of at most its capacity.</summary>
    private sealed class ThreadFree(int capacity)
    {
        private readonly Block?[] _items = new Block?[capacity];
        private int _count;

        public Block? TryPop()
        {
            if (_count == 0)
            {
                return null;
            }
            var block = _items[--_count];
            _items[_count] = null;
            return block;
        }

        public bool TryPush(Block block)
        {
            if (_count == _items.Length)
            {
                return false;
            }
            _items[_count++] = block;
            return true;
        }
    }

    // Thread-safe: every member takes the shard's lock (a stack is short work: no wait is ever taken under it).
    /// <summary>One stack of free blocks and its bound.</summary>
    private sealed class Shard(int maxBlocks)
    {
        public readonly Lock Lock = new();
        // NOTE: last in, first out. The block returned last is the one most likely still in the CPU cache; a queue
        // handed out the coldest block, and the first touch of each block (its header, then the copy into it) showed
        // in profiles as a few percent of the server's time.
        // The free blocks, bottom first. NOTE: an array rather than Stack<T>: the idle trim drops from the bottom.
        private Block[] _free = new Block[Math.Clamp(maxBlocks, 1, 16)];
        private int _count;
        // The fewest free blocks seen since the last trim: that many at the bottom were not rented in the period.
        private int _lowWatermark;

        public int Count => _count;

        public Block? TryPop()
        {
            if (Volatile.Read(ref _count) == 0)
            {
                return null; // a glance without the lock: an empty shard is passed by, not locked
            }
            lock (Lock)
            {
                if (_count == 0)
                {
                    return null;
                }
                var block = _free[--_count];
                _free[_count] = null!;
                _lowWatermark = Math.Min(_lowWatermark, _count);
                return block;
            }
        }

        public bool TryPush(Block block)
        {
            lock (Lock)
            {
                if (_count >= maxBlocks)
                {
                    return false;
                }
                if (_count == _free.Length)
                {
                    Array.Resize(ref _free, Math.Min(_free.Length * 2, Math.Max(maxBlocks, 16)));
                }
                _free[_count++] = block;
                return true;
            }
        }

        public int TrimIdle()
        {
            lock (Lock)
            {
                var idle = Math.Min(_lowWatermark, _count);
                if (idle > 0)
                {
                    Array.Copy(_free, idle, _free, 0, _count - idle);
                    Array.Clear(_free, _count - idle, idle);
                    _count -= idle;
                    if (_free.Length > 64 && _count < _free.Length / 4)
                    {
                        Array.Resize(ref _free, Math.Max(16, _free.Length / 2));
                    }
                }
                _lowWatermark = _count;
                return idle;
            }
        }
    }

    // Owned by its renter between Rent and Dispose, then by the pool.
    /// <summary>A block is its own owner, so renting a kept block allocates nothing.</summary>
    private sealed class Block(BlockMemoryPool pool, byte[] array, bool pinned) : IMemoryOwner<byte>
    {
        private int _leased = 1;

        // NOTE: a block of the pinned heap is handed out as pre-pinned memory (CreateFromPinnedArray): its slices keep
        // the mark, so Pin() (the socket's send pins every segment it gathers) takes the address instead of allocating a
        // pinned GCHandle and freeing it after the send. Those handles were 1-2% of the proxy's CPU on large bodies.
        private readonly Memory<byte> _memory = pinned ? MemoryMarshal.CreateFromPinnedArray(array, 0, array.Length) : array;

        public Memory<byte> Memory => _memory;

        public void Lease() => Volatile.Write(ref _leased, 1);

        /// <summary>Returns the block to the pool; a second Dispose is ignored, so a block is never handed out twice.</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _leased, 0) == 1)
            {
                pool.Return(this);
            }
        }
    }
}
