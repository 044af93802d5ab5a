using System.Buffers;
using System.IO.Pipelines;
using System.Threading.Tasks.Sources;

namespace Proxy.Buffers;

// The reader's side: its methods run on the reader (CancelPendingRead on any thread).
public sealed partial class SpscPipe
{
    private bool _readerDone;

    /// <summary>
    /// A read can complete now: a cancel, the writer's end, or bytes past what the reader examined (as for Pipe, bytes
    /// examined but not consumed are not news: TryRead and ReadAsync wait for more).
    /// </summary>
    private bool ReadReady()
    {
        if ((Volatile.Read(ref _flags) & (WriterCompleted | ReadCanceled)) != 0)
        {
            return true;
        }
        return Volatile.Read(ref _committed) > _examined;
    }

    private bool TryReadCore(out ReadResult result)
    {
        ThrowIfReaderDone();
        if (ReadReady())
        {
            result = GetReadResult();
            return true;
        }
        result = default;
        return false;
    }

    private ValueTask<ReadResult> ReadAsyncCore(CancellationToken cancellationToken)
    {
        ThrowIfReaderDone();
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<ReadResult>(cancellationToken);
        }
        if (ReadReady())
        {
            return new ValueTask<ReadResult>(GetReadResult());
        }
        var version = _reader.Waiter.Begin(cancellationToken);
        if (ReadReady() && _reader.Waiter.TryAbandon())
        {
            return new ValueTask<ReadResult>(GetReadResult());
        }
        _reader.Waiter.Register(this, static s => ((SpscPipe)s!)._reader.Waiter.OnTokenCanceled(((SpscPipe)s!)._readerScheduler));
        return new ValueTask<ReadResult>(_reader, version);
    }

    private ReadResult GetReadResult()
    {
        // The flags first: a writer that completed committed its last bytes before setting its flag.
        var flags = Volatile.Read(ref _flags);
        var canceled = (flags & ReadCanceled) != 0 && TakeFlag(ReadCanceled);
        var completed = (flags & WriterCompleted) != 0;
        if (completed && _writerError is { } error)
        {
            Rethrow(error);
        }
        var committed = Volatile.Read(ref _committed);
        return new ReadResult(BufferTo(committed), canceled, completed);
    }

    /// <summary>The unconsumed bytes up to <paramref name="committed"/>.</summary>
    private ReadOnlySequence<byte> BufferTo(long committed)
    {
        var head = _head;
        if (head is null)
        {
            head = _first;
            if (head is null)
            {
                return default;
            }
            _head = head;
            _headIndex = 0;
        }
        // A block read to its end that the writer has left since the last AdvanceTo goes back now (see SkipDrained).
        head = SkipDrained(head, ref _headIndex);
        _head = head;
        var end = head;
        while (true)
        {
            // Next first: once it is there, this segment's memory is cut to its final length.
            var next = end.NextSegment;
            if (next is null || committed <= end.RunningIndex + end.Memory.Length)
            {
                break;
            }
            end = next;
        }
        return new ReadOnlySequence<byte>(head, _headIndex, end, (int)(committed - end.RunningIndex));
    }

    private void AdvanceToCore(SequencePosition consumed, SequencePosition examined)
    {
        ThrowIfReaderDone();
        var consumedAt = PositionOf(consumed, _consumed);
        var examinedAt = PositionOf(examined, consumedAt);
        if (consumedAt < _consumed || examinedAt < consumedAt || examinedAt > Volatile.Read(ref _committed))
        {
            throw new InvalidOperationException("The consumed and examined positions must come from the last read, in order: consumed, then examined.");
        }
        var examinedMore = examinedAt != _examined;
        _examined = examinedAt;
        if (examinedMore && _pauseWriterThreshold > 0)
        {
            // As Pipe counts it: examined bytes no longer hold the writer back, consumed or not.
            Interlocked.Exchange(ref _examinedShared, examinedAt); // a full fence before the writer's waiter is looked at
            if (_writer.Waiter.IsWaiting && Volatile.Read(ref _committed) - examinedAt < ResumeThreshold)
            {
                _writer.Waiter.Signal(_writerScheduler);
            }
        }
        if (consumedAt == _consumed)
        {
            return;
        }
        _consumed = consumedAt;
        Volatile.Write(ref _consumedShared, consumedAt);

        // Blocks wholly before the consumed position go back to the pool.
        var target = (Segment)consumed.GetObject()!;
        var index = consumed.GetInteger();
        var head = _head!;
        while (head != target)
        {
            var next = head.NextSegment!;
            head.Release();
            KeepSpare(head);
            head = next;
        }
        _head = SkipDrained(head, ref index);
        _headIndex = index;
    }

    /// <summary>
    /// Gives back head blocks read to their end that the writer has left (another block follows): the reader's buffer
    /// starts in the next one, so a send of one segment is one send(2), not a sendmsg(2) with an empty first buffer.
    /// </summary>
    private Segment SkipDrained(Segment head, ref int index)
    {
        while (head.NextSegment is { } following && index == head.Memory.Length)
        {
            head.Release();
            KeepSpare(head);
            head = following;
            index = 0;
        }
        return head;
    }

    /// <summary>The pipe position of <paramref name="position"/>; <paramref name="fallback"/> for one of an empty read (no segment).</summary>
    private static long PositionOf(SequencePosition position, long fallback)
        => position.GetObject() is Segment segment ? segment.RunningIndex + position.GetInteger() : fallback;

    private void CompleteReader(Exception? exception)
    {
        if (_readerDone)
        {
            return;
        }
        _readerDone = true;
        _readerError = exception;
        var before = SetFlag(ReaderCompleted);
        _writer.Waiter.Signal(_writerScheduler);
        OnEndCompleted(before, WriterCompleted);
    }

    private void CancelPendingReadCore()
    {
        SetFlag(ReadCanceled);
        _reader.Waiter.Signal(_readerScheduler);
    }

    private void ThrowIfReaderDone()
    {
        if (_readerDone)
        {
            throw new InvalidOperationException("Reading is not allowed after the reader was completed.");
        }
    }

    private sealed class SpscPipeReader(SpscPipe pipe) : PipeReader, IValueTaskSource<ReadResult>
    {
        public Waiter Waiter;

        public void ResetWaiter()
        {
            Waiter.Reset();
            pipe._readerDone = false;
            pipe._readerError = null;
        }

        public override bool TryRead(out ReadResult result) => pipe.TryReadCore(out result);

        public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default) => pipe.ReadAsyncCore(cancellationToken);

        public override void AdvanceTo(SequencePosition consumed) => pipe.AdvanceToCore(consumed, consumed);

        public override void AdvanceTo(SequencePosition consumed, SequencePosition examined) => pipe.AdvanceToCore(consumed, examined);

        public override void CancelPendingRead() => pipe.CancelPendingReadCore();

        public override void Complete(Exception? exception = null) => pipe.CompleteReader(exception);

        public ValueTaskSourceStatus GetStatus(short token) => Waiter.Status(token, faulted: pipe.IsSet(WriterCompleted) && pipe._writerError is not null);

        public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
        {
            Waiter.Check(token);
            Waiter.OnCompleted(continuation, state, flags, pipe._readerScheduler);
        }

        public ReadResult GetResult(short token)
        {
            Waiter.Consume(token);
            return pipe.GetReadResult();
        }
    }
}
