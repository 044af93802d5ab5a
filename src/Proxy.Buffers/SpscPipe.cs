using System.Buffers;
using System.IO.Pipelines;
using System.Runtime.ExceptionServices;

namespace Proxy.Buffers;

// Thread-safe for one writer and one reader: each end is used by one party at a time (its thread may change between
// calls, as an async method's does), and the two ends run at once. CancelPendingRead and CancelPendingFlush may come from
// any thread; an end's Complete from another thread only once that end is no longer in use
// (its own party is done). Fields are grouped by owner below.
/// <summary>
/// A <see cref="Pipe"/> for one producer and one consumer that hands bytes over without a lock: the ends meet through
/// two positions (bytes flushed, bytes consumed), a flags word and one waiter per end, so a flush, a read and an
/// advance cost a few plain and volatile accesses and at most one atomic each, where <see cref="Pipe"/> takes its lock
/// (two atomics on the object header) in each of them.
/// </summary>
/// <remarks>
/// <para>
/// NOTE: measured on the relay (session 27): the runtime's object lock entered from <see cref="Pipe"/> was 4% of the CPU of a
/// proxied 1 KB POST and 8% of a proxied gRPC call, all of it uncontended: the cost is the locked compare-exchange itself.
/// </para>
/// <para>
/// What it keeps of <see cref="Pipe"/>'s contract: the pool and minimum segment size, the pause and resume thresholds, the
/// reader's and writer's schedulers, examined versus consumed, <see cref="PipeReader.CancelPendingRead"/> and
/// <see cref="PipeWriter.CancelPendingFlush"/> (a cancel with nothing waiting applies to the next call), a writer's error
/// rethrown to the reader, bytes written after the reader completed dropped, and <see cref="Reset"/> once both ends completed.
/// What it leaves out: a synchronization context (<see cref="PipeOptions.UseSynchronizationContext"/> must be false) and
/// the guards against two readers or two writers at once.
/// </para>
/// <para>
/// NOTE: the writer keeps its last block while the pipe lives, also when the reader has consumed everything (the reader
/// cannot take back a block the writer may be writing into): an idle stream holds one block, at most four times the size
/// its last write asked for (256 bytes for a small SSE event in the engine's stream pool), instead of none. Once the
/// reader consumed everything, the next write starts over at that block's first byte (see RewindSegment).
/// </para>
/// </remarks>
public sealed partial class SpscPipe
{
    // Flags (_flags): set with Interlocked.Or, the cancel flags cleared with Interlocked.And by the end that observes them.
    private const int WriterCompleted = 1;
    private const int ReaderCompleted = 2;
    private const int ReadCanceled = 4;
    private const int FlushCanceled = 8;
    private const int Released = 16; // both ends completed and the blocks went back to the pool

    private readonly MemoryPool<byte>? _pool;
    private readonly int _maxPooledSize;
    private readonly int _minimumSegmentSize;
    private readonly long _pauseWriterThreshold;
    private readonly long _resumeWriterThreshold;
    private readonly PipeScheduler _readerScheduler;
    private readonly PipeScheduler _writerScheduler;
    private readonly SpscPipeReader _reader;
    private readonly SpscPipeWriter _writer;

    // ---- Shared: written by one end, read by the other (positions count bytes since the pipe was created or reset) ----

    // End of the flushed bytes. Written by the writer (Interlocked.Exchange: a full fence before it looks at the reader's
    // waiter), read by the reader after _flags (a writer that completed committed its last bytes before its flag).
    private long _committed;
    // End of the examined bytes, published by the reader when the writer may wait on it (a pause threshold).
    private long _examinedShared;
    // End of the consumed bytes, published by the reader (a plain volatile store): the writer starts a fresh block once
    // everything it flushed was consumed, as Pipe does, so a burst of writes lands in one segment.
    private long _consumedShared;
    private int _flags;
    private Exception? _writerError;
    // The first segment, published by the writer before the bytes in it are committed (the reader starts there).
    private volatile Segment? _first;
    // One segment object the reader gave back for the writer's next block (the blocks themselves go back to the pool).
    private Segment? _spare;

    // ---- Writer's ----

    private Segment? _tail;
    private long _writerCommitted; // the writer's copy of _committed
    private long _unflushed;

    // ---- Reader's ----

    private Segment? _head;
    private int _headIndex;
    private long _consumed;
    private long _examined;

    /// <summary>A pipe with <paramref name="options"/> (<see cref="PipeOptions.Default"/> when null).</summary>
    /// <exception cref="ArgumentException">The options ask for the synchronization context.</exception>
    public SpscPipe(PipeOptions? options = null)
    {
        options ??= PipeOptions.Default;
        if (options.UseSynchronizationContext)
        {
            throw new ArgumentException("SpscPipe does not continue on a synchronization context: set PipeOptions.UseSynchronizationContext to false.", nameof(options));
        }
        _pool = options.Pool == MemoryPool<byte>.Shared ? null : options.Pool;
        _maxPooledSize = _pool is { MaxBufferSize: > 0 } pool ? pool.MaxBufferSize : 0;
        _minimumSegmentSize = options.MinimumSegmentSize;
        _pauseWriterThreshold = options.PauseWriterThreshold;
        _resumeWriterThreshold = options.ResumeWriterThreshold;
        _readerScheduler = options.ReaderScheduler;
        _writerScheduler = options.WriterScheduler;
        _reader = new SpscPipeReader(this);
        _writer = new SpscPipeWriter(this);
    }

    public PipeReader Reader => _reader;

    public PipeWriter Writer => _writer;

    /// <summary>
    /// Readies a pipe whose two ends completed for another use, keeping its segment objects.
    /// </summary>
    /// <exception cref="InvalidOperationException">An end has not completed.</exception>
    public void Reset()
    {
        var flags = Volatile.Read(ref _flags);
        if ((flags & (WriterCompleted | ReaderCompleted)) != (WriterCompleted | ReaderCompleted))
        {
            throw new InvalidOperationException("Both the reader and the writer must be completed before the pipe is reset.");
        }
        ReleaseSegments(); // normally done already, by the end that completed last
        _committed = 0;
        _examinedShared = 0;
        _consumedShared = 0;
        _writerError = null;
        _first = null;
        _tail = null;
        _writerCommitted = 0;
        _unflushed = 0;
        _head = null;
        _headIndex = 0;
        _consumed = 0;
        _examined = 0;
        _reader.ResetWaiter();
        _writer.ResetWaiter();
        Volatile.Write(ref _flags, 0);
    }

    private bool IsSet(int flag) => (Volatile.Read(ref _flags) & flag) != 0;

    /// <summary>Sets <paramref name="flag"/>; returns the flags before.</summary>
    private int SetFlag(int flag) => Interlocked.Or(ref _flags, flag);

    /// <summary>Clears <paramref name="flag"/> when set; true when this call cleared it.</summary>
    private bool TakeFlag(int flag)
    {
        if ((Volatile.Read(ref _flags) & flag) == 0)
        {
            return false;
        }
        return (Interlocked.And(ref _flags, ~flag) & flag) != 0;
    }

    /// <summary>The end that completed second gives every block back (both ends are done with them).</summary>
    private void OnEndCompleted(int flagsBefore, int other)
    {
        if ((flagsBefore & other) != 0)
        {
            ReleaseSegments();
        }
    }

    private void ReleaseSegments()
    {
        if ((SetFlag(Released) & Released) != 0)
        {
            return;
        }
        var segment = _head ?? _first;
        while (segment is not null)
        {
            var next = segment.NextSegment;
            segment.Release();
            KeepSpare(segment);
            segment = next;
        }
        _head = null;
        _first = null;
        _tail = null;
    }

    /// <summary>Keeps <paramref name="segment"/> (already released) as the spare when there is none.</summary>
    private void KeepSpare(Segment segment)
    {
        if (Volatile.Read(ref _spare) is null)
        {
            Interlocked.CompareExchange(ref _spare, segment, null);
        }
    }

    private Segment TakeSegment()
    {
        if (Volatile.Read(ref _spare) is not null && Interlocked.Exchange(ref _spare, null) is { } spare)
        {
            return spare;
        }
        return new Segment();
    }

    private static void Schedule(PipeScheduler scheduler, Action<object?> continuation, object? state, ExecutionContext? context)
    {
        if (context is null)
        {
            scheduler.Schedule(continuation, state);
        }
        else
        {
            scheduler.Schedule(static s =>
            {
                var (ctx, cb, st) = ((ExecutionContext, Action<object?>, object?))s!;
                ExecutionContext.Run(ctx, static x =>
                {
                    var (c, a) = ((Action<object?>, object?))x!;
                    c(a);
                }, (cb, st));
            }, (context, continuation, state));
        }
    }

    private static void Rethrow(Exception error) => ExceptionDispatchInfo.Capture(error).Throw();

    /// <summary>
    /// A block of the pipe. Its <see cref="ReadOnlySequenceSegment{T}.Memory"/> is the whole block while the writer may
    /// still write into it, and is cut to the written bytes when the writer moves on to the next segment; the reader uses
    /// only the flushed part of the last one.
    /// </summary>
    private sealed class Segment : ReadOnlySequenceSegment<byte>
    {
        private IMemoryOwner<byte>? _owner;
        private byte[]? _array;
        private volatile Segment? _next;

        /// <summary>The whole block (writer).</summary>
        public Memory<byte> Block { get; private set; }

        /// <summary>Bytes written into the block (writer).</summary>
        public int Written { get; set; }

        /// <summary>The next segment, published after this one's memory was cut to its final length.</summary>
        public Segment? NextSegment => _next;

        public void Take(IMemoryOwner<byte> owner, long runningIndex)
        {
            _owner = owner;
            Set(owner.Memory, runningIndex);
        }

        public void Take(byte[] array, long runningIndex)
        {
            _array = array;
            Set(array, runningIndex);
        }

        /// <summary>
        /// Writer: gives this segment's block to <paramref name="next"/> (which starts over at its first byte, at
        /// <paramref name="runningIndex"/>). This segment keeps its memory for the reader's positions, but owns nothing:
        /// its <see cref="Release"/> returns no block.
        /// </summary>
        public void HandOverBlock(Segment next, long runningIndex)
        {
            var block = Block;
            if (_owner is { } owner)
            {
                next._owner = owner;
                _owner = null;
            }
            else
            {
                next._array = _array;
                _array = null;
            }
            next.Set(block, runningIndex);
        }

        private void Set(Memory<byte> block, long runningIndex)
        {
            Block = block;
            Memory = block;
            RunningIndex = runningIndex;
            Written = 0;
            Next = null;
            _next = null;
        }

        /// <summary>Writer: the block is final at <see cref="Written"/> bytes and <paramref name="next"/> follows it.</summary>
        public void Link(Segment next)
        {
            // NOTE: Slice keeps the memory's object and start, so a reader that reads Memory while this runs sees the old
            // length or the new one, never a torn value; either covers every byte flushed in this block.
            Memory = Block[..Written];
            Next = next;
            _next = next; // volatile: publishes the cut length and the next segment's fields
        }

        public void Release()
        {
            _owner?.Dispose();
            _owner = null;
            if (_array is not null)
            {
                ArrayPool<byte>.Shared.Return(_array);
                _array = null;
            }
            Block = default;
            Memory = default;
            Next = null;
            _next = null;
        }
    }
}
