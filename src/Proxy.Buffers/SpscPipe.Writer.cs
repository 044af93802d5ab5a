using System.Buffers;
using System.IO.Pipelines;
using System.Threading.Tasks.Sources;

namespace Proxy.Buffers;

// The writer's side: its methods run on the writer (CancelPendingFlush on any thread).
public sealed partial class SpscPipe
{
    private bool _writerDone;
    // Published by the reader's completion (Interlocked.Or on _flags), read by the writer after it saw the flag.
    private Exception? _readerError;

    /// <summary>A waiting writer resumes below this many unconsumed bytes (at least 1: an empty pipe always resumes it).</summary>
    private long ResumeThreshold => Math.Max(1, _resumeWriterThreshold);

    private Memory<byte> GetMemoryCore(int sizeHint)
    {
        if (_writerDone)
        {
            throw new InvalidOperationException("Writing is not allowed after the writer was completed.");
        }
        ArgumentOutOfRangeException.ThrowIfNegative(sizeHint);
        var tail = _tail;
        if (tail is not null && tail.Block.Length - tail.Written >= Math.Max(1, sizeHint)
            && (_unflushed > 0 || tail.Written == 0 || Volatile.Read(ref _consumedShared) != _writerCommitted))
        {
            return tail.Block[tail.Written..];
        }
        // A full block, or the reader consumed every flushed byte: the next write starts a block of its own (the reader
        // gives the drained one back), so what the reader gets next is one segment, as Pipe's reset write head does.
        if (tail is not null && _unflushed == 0 && Volatile.Read(ref _consumedShared) == _writerCommitted
            && CanRewind(tail.Block.Length, Math.Max(_minimumSegmentSize, Math.Max(1, sizeHint))))
        {
            return RewindSegment(tail).Block;
        }
        return AppendSegment(tail, sizeHint).Block;
    }

    /// <summary>
    /// Whether a drained block of <paramref name="blockLength"/> bytes is reused for a write that needs
    /// <paramref name="needed"/>: it must hold the write, and be at most four times larger, so a stream that went from a
    /// bulk body to small messages (an SSE stream after a large first event) does not hold a large block while idle.
    /// </summary>
    private static bool CanRewind(int blockLength, int needed) => blockLength >= needed && blockLength <= 4 * (long)needed;

    /// <summary>
    /// The writer's next segment over the same block as <paramref name="tail"/>, from its start: every byte flushed into
    /// it was consumed, so the reader no longer reads it (a reader may not use a buffer after it advanced past it).
    /// </summary>
    /// <remarks>
    /// NOTE: a stream of small messages, each read before the next (gRPC server streaming, SSE), took a fresh block per
    /// message and gave the last one back: a rent and a return each time, and a copy into memory last used a whole block
    /// of messages ago. In the relay's profile of server streaming (1 KB messages on 70 streams), the pool's rent, the
    /// segment's return and the first touch of each block were about 15% of the user samples. Rewound, a stream keeps one
    /// block and writes each message over the last one, whose cache lines are still warm.
    /// The block moves to the new segment before that segment is linked: the reader releases the old one only once it
    /// sees the link (it never gives back the last segment), and by then that segment owns nothing.
    /// </remarks>
    private Segment RewindSegment(Segment tail)
    {
        var segment = TakeSegment();
        tail.HandOverBlock(segment, tail.RunningIndex + tail.Written);
        tail.Link(segment);
        _tail = segment;
        return segment;
    }

    private Segment AppendSegment(Segment? tail, int sizeHint)
    {
        var size = Math.Max(_minimumSegmentSize, sizeHint);
        var segment = TakeSegment();
        var runningIndex = tail is null ? 0 : tail.RunningIndex + tail.Written;
        if (_pool is not null && size <= _maxPooledSize)
        {
            segment.Take(_pool.Rent(size), runningIndex);
        }
        else
        {
            segment.Take(ArrayPool<byte>.Shared.Rent(size), runningIndex);
        }
        if (tail is null)
        {
            _first = segment; // volatile: before any byte of it is committed
        }
        else
        {
            tail.Link(segment);
        }
        _tail = segment;
        return segment;
    }

    private void AdvanceCore(int bytes)
    {
        var tail = _tail;
        if (bytes == 0)
        {
            return;
        }
        if (tail is null || (uint)bytes > (uint)(tail.Block.Length - tail.Written))
        {
            throw new ArgumentOutOfRangeException(nameof(bytes), "Advance was called for more bytes than GetMemory or GetSpan returned.");
        }
        if (IsSet(ReaderCompleted))
        {
            return; // nobody will read them: the space is written over by the next write, as Pipe drops them
        }
        tail.Written += bytes;
        _unflushed += bytes;
    }

    /// <summary>Makes the written bytes readable and wakes a waiting reader.</summary>
    private void Commit()
    {
        if (_unflushed == 0)
        {
            return;
        }
        _writerCommitted += _unflushed;
        _unflushed = 0;
        Interlocked.Exchange(ref _committed, _writerCommitted); // a full fence before the reader's waiter is looked at
        if (_reader.Waiter.IsWaiting)
        {
            _reader.Waiter.Signal(_readerScheduler);
        }
    }

    private ValueTask<FlushResult> FlushAsyncCore(CancellationToken cancellationToken)
    {
        if (_writerDone)
        {
            throw new InvalidOperationException("Writing is not allowed after the writer was completed.");
        }
        Commit();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<FlushResult>(cancellationToken);
        }
        if (IsSet(ReaderCompleted | FlushCanceled) || !MustWait())
        {
            return new ValueTask<FlushResult>(GetFlushResult());
        }
        var version = _writer.Waiter.Begin(cancellationToken);
        if (FlushReady() && _writer.Waiter.TryAbandon())
        {
            return new ValueTask<FlushResult>(GetFlushResult());
        }
        _writer.Waiter.Register(this, static s => ((SpscPipe)s!)._writer.Waiter.OnTokenCanceled(((SpscPipe)s!)._writerScheduler));
        return new ValueTask<FlushResult>(_writer, version);
    }

    /// <summary>A flush waits when the unconsumed bytes reached the pause threshold.</summary>
    private bool MustWait() => _pauseWriterThreshold > 0 && _writerCommitted - Volatile.Read(ref _examinedShared) >= _pauseWriterThreshold;

    /// <summary>A waiting flush may complete: the reader went below the resume threshold, completed, or a cancel came.</summary>
    private bool FlushReady()
        => IsSet(ReaderCompleted | FlushCanceled) || _writerCommitted - Volatile.Read(ref _examinedShared) < ResumeThreshold;

    private FlushResult GetFlushResult()
    {
        var canceled = TakeFlag(FlushCanceled);
        var completed = IsSet(ReaderCompleted);
        if (completed && _readerError is { } error)
        {
            Rethrow(error);
        }
        return new FlushResult(canceled, completed);
    }

    private void CompleteWriter(Exception? exception)
    {
        if (_writerDone)
        {
            return;
        }
        _writerDone = true;
        _writerError = exception;
        Commit();
        var before = SetFlag(WriterCompleted); // publishes the error and the last commit
        _reader.Waiter.Signal(_readerScheduler);
        OnEndCompleted(before, ReaderCompleted);
    }

    private void CancelPendingFlushCore()
    {
        SetFlag(FlushCanceled);
        _writer.Waiter.Signal(_writerScheduler);
    }

    private sealed class SpscPipeWriter(SpscPipe pipe) : PipeWriter, IValueTaskSource<FlushResult>
    {
        public Waiter Waiter;

        public void ResetWaiter()
        {
            Waiter.Reset();
            pipe._writerDone = false;
        }

        public override Memory<byte> GetMemory(int sizeHint = 0) => pipe.GetMemoryCore(sizeHint);

        public override Span<byte> GetSpan(int sizeHint = 0) => pipe.GetMemoryCore(sizeHint).Span;

        public override void Advance(int bytes) => pipe.AdvanceCore(bytes);

        public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default) => pipe.FlushAsyncCore(cancellationToken);

        public override void CancelPendingFlush() => pipe.CancelPendingFlushCore();

        public override void Complete(Exception? exception = null) => pipe.CompleteWriter(exception);

        public override bool CanGetUnflushedBytes => true;

        public override long UnflushedBytes => pipe._unflushed;

        public ValueTaskSourceStatus GetStatus(short token) => Waiter.Status(token, faulted: pipe.IsSet(ReaderCompleted) && pipe._readerError is not null);

        public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
        {
            Waiter.Check(token);
            Waiter.OnCompleted(continuation, state, flags, pipe._writerScheduler);
        }

        public FlushResult GetResult(short token)
        {
            Waiter.Consume(token);
            return pipe.GetFlushResult();
        }
    }
}
