using System.Buffers;
using System.Threading.Tasks.Sources;

namespace Proxy.Protocols.Http2;

// A response body lent to the frame-writer loop: the app (a relay) hands over bytes it keeps valid, the writer loop frames
// them from there and gives them back.
//
// NOTE: the memory must never be read after the lender got it back. A lend has three states: Idle (lent, nobody reads it),
// Copying (the writer loop is copying from it) and Ended (the lender's task completes; it is the lender's again). Only
// the writer loop moves Idle -> Copying, and it reads the bytes only in Copying; anyone may end an Idle lend (Idle ->
// Ended: the read loop when the client resets the stream or the connection closes, even while the writer loop is stuck
// on a client that does not read; the app's abort; the connection once the writer loop exited; the lender when it finds
// the output closed). An end asked for while the writer copies is done by the writer loop as it leaves Copying.
// _lentOutputClosed: this life's output is over; a lend made after it ends at once.
internal sealed partial class Http2Stream
{
    private LentOutput? _lentOutput;         // lender: published by LendResponseBodyAsync; cleared by whoever ends it
    private volatile bool _lentOutputClosed; // any side: this life's output is over (reset for the next life)
    private LentOutput? _spareLent;          // lender: one per stream, reused by each lend (they never overlap)

    public override bool CanLendResponseBody => true;

    public override ValueTask<bool> LendResponseBodyAsync(ReadOnlySequence<byte> body)
    {
        if (body.IsEmpty)
        {
            return new ValueTask<bool>(true);
        }
        if (_abortRequested || _outputReleased || _lentOutputClosed)
        {
            return new ValueTask<bool>(false);
        }
        if (Volatile.Read(ref _responseStarted) == 0 || _responsePipe.Writer.UnflushedBytes > 0)
        {
            return FlushThenLendAsync(body);
        }
        return Lend(body);
    }

    /// <summary>The head (and bytes written before) go first: the flush starts the response and publishes them.</summary>
    private async ValueTask<bool> FlushThenLendAsync(ReadOnlySequence<byte> body)
    {
        var flush = await _responseBodyWriter.FlushAsync();
        if (flush.IsCompleted || flush.IsCanceled)
        {
            return false;
        }
        return await Lend(body);
    }

    private ValueTask<bool> Lend(ReadOnlySequence<byte> body)
    {
        var lent = _spareLent ??= new LentOutput(this, _connection.Scheduler);
        lent.Start(body);
        Interlocked.Exchange(ref _lentOutput, lent); // a full fence: the checks below cannot move above it
        if (_lentOutputClosed)
        {
            lent.RequestEnd(); // the output closed meanwhile: nobody else may look at this lend
        }
        else
        {
            SignalOutput();
            if (_connection.LendsClosed)
            {
                lent.RequestEnd(); // the writer loop is gone: its channel takes no more signals
            }
        }
        return lent.Task;
    }

    public override void RevokeLentResponseBody()
    {
        if (Volatile.Read(ref _lentOutput) is { } lent)
        {
            lent.Revoked = true;
            SignalOutput(); // the writer loop drops it on the stream's next turn
        }
    }

    /// <summary>Writer loop: the lent body to frame, if any.</summary>
    public LentOutput? PendingLent => Volatile.Read(ref _lentOutput);

    /// <summary>
    /// This life's output is over (the writer loop stops the stream, the read loop releases it, the app aborts, the
    /// connection closed): a pending lend ends unsent, now or as the writer loop finishes its copy, and a later one at once.
    /// </summary>
    public void EndLentOutput()
    {
        _lentOutputClosed = true;
        // A full fence between the flag and the slot (a lender does the mirror: publishes, then reads the flag), so one
        // of the two sees the other's write.
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _lentOutput) is { } lent)
        {
            lent.RequestEnd();
        }
    }

    /// <summary>The lend ended: the slot is free for the lender's next one.</summary>
    private void ClearLent(LentOutput lent) => Interlocked.CompareExchange(ref _lentOutput, null, lent);

    /// <summary>Pooling: a new life lends afresh (the last lend of the old one ended before its handler finished).</summary>
    private void ResetLentForPool()
    {
        _lentOutput = null;
        _lentOutputClosed = false;
    }

    /// <summary>
    /// One lend: the bytes (the writer loop's cursor), its state and the lender's wait. The wait resumes on the event loop
    /// of the thread that ends it, after its batch, or on the thread pool: never inline in the ender's code.
    /// </summary>
    // Remaining is read and written by the writer loop in Copying only; the state decides who may touch the bytes.
    internal sealed class LentOutput(Http2Stream stream, WorkScheduler scheduler) : IValueTaskSource<bool>
    {
        private const int Idle = 0, Copying = 1, Ended = 2;
        private ManualResetValueTaskSourceCore<bool> _core; // continuations are dispatched by Dispatch, not inline
        private int _state = Ended;
        private volatile bool _endRequested;
        private Action<object?>? _continuation;
        private object? _continuationState;

        /// <summary>Bytes not framed yet (writer loop, in Copying).</summary>
        public ReadOnlySequence<byte> Remaining { get; set; }

        /// <summary>The lender gave up: the writer loop ends the lend unsent on the stream's next turn.</summary>
        public volatile bool Revoked;

        public ValueTask<bool> Task => new(this, _core.Version);

        /// <summary>Lender: a new lend of <paramref name="body"/> (the previous one ended).</summary>
        public void Start(ReadOnlySequence<byte> body)
        {
            _core.Reset();
            _endRequested = false;
            Revoked = false;
            Remaining = body;
            Volatile.Write(ref _state, Idle); // publishes the fields above to the writer loop's TryBeginCopy
        }

        /// <summary>Writer loop: takes the bytes for a copy; false when the lend already ended.</summary>
        public bool TryBeginCopy() => Interlocked.CompareExchange(ref _state, Copying, Idle) == Idle;

        /// <summary>Writer loop, in Copying: the copy is done and bytes are left; an end asked for meanwhile happens now.</summary>
        public void EndCopy()
        {
            Interlocked.Exchange(ref _state, Idle); // a full fence: the check below cannot move above it
            if (_endRequested && Interlocked.CompareExchange(ref _state, Ended, Idle) == Idle)
            {
                Complete(sent: false);
            }
        }

        /// <summary>Writer loop, in Copying: the lend is over (every byte framed, or revoked).</summary>
        public void FinishFromCopy(bool sent)
        {
            Volatile.Write(ref _state, Ended);
            Complete(sent);
        }

        /// <summary>Any thread: ends the lend unsent now if nobody copies from it, else as the copy ends.</summary>
        public void RequestEnd()
        {
            _endRequested = true; // before the exchange below (a full fence), so EndCopy sees it if this one fails
            if (Interlocked.CompareExchange(ref _state, Ended, Idle) == Idle)
            {
                Complete(sent: false);
            }
        }

        private void Complete(bool sent)
        {
            Remaining = default;
            stream.ClearLent(this);
            _core.SetResult(sent);
        }

        public bool GetResult(short token) => _core.GetResult(token);

        public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

        public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags)
        {
            if ((flags & ValueTaskSourceOnCompletedFlags.FlowExecutionContext) != 0 && ExecutionContext.Capture() is { } context)
            {
                // Not an async method's await (those flow their context themselves): run the continuation in the caller's.
                var inner = continuation;
                var innerState = state;
                continuation = _ => ExecutionContext.Run(context, static s => { var (c, st) = ((Action<object?>, object?))s!; c(st); }, (inner, innerState));
                state = null;
            }
            _continuation = continuation;
            _continuationState = state;
            // NOTE: the core calls Dispatch inline from Complete (on the ender's thread: the writer loop's, the read loop's);
            // Dispatch moves the lender on without running it there.
            _core.OnCompleted(static s => ((LentOutput)s!).Dispatch(), this, token, ValueTaskSourceOnCompletedFlags.None);
        }

        private void Dispatch()
        {
            var continuation = _continuation!;
            var state = _continuationState;
            _continuation = null;
            _continuationState = null;
            scheduler.Schedule(continuation, state);
        }
    }
}
