using System.IO.Pipelines;
using System.Threading.Tasks.Sources;

namespace Proxy.Buffers;

public sealed partial class SpscPipe
{
    // The waiting end owns it (Begin, TryAbandon, OnCompleted, End); the other end, a cancel or a token only Signal it.
    /// <summary>
    /// One end's wait for the other: Idle, then Waiting (the end found nothing and is about to be awaited), Parked (its
    /// continuation is stored), Signaled (the other end made progress). The end that waits sets Waiting with a full fence
    /// and looks at the shared state again; the end that makes progress publishes with a full fence and then looks at
    /// this state: one of the two always sees the other, so no wake-up is lost.
    /// </summary>
    private struct Waiter
    {
        private const int Idle = 0;
        private const int Waiting = 1;
        private const int Parked = 2;
        private const int Signaled = 3;

        private int _state;
        private short _version;
        private int _tokenCanceled;
        private Action<object?>? _continuation;
        private object? _continuationState;
        private ExecutionContext? _context;
        private CancellationToken _cancellationToken;
        private CancellationTokenRegistration _registration;

        public bool IsWaiting => Volatile.Read(ref _state) is Waiting or Parked;

        public bool IsSignaled => Volatile.Read(ref _state) == Signaled;

        /// <summary>The token of this wait fired: its result is an <see cref="OperationCanceledException"/>.</summary>
        public bool TokenCanceled => Volatile.Read(ref _tokenCanceled) != 0;

        /// <summary>Starts a wait (a full fence): the caller looks at the shared state once more after this.</summary>
        public short Begin(CancellationToken cancellationToken)
        {
            _version++;
            _tokenCanceled = 0;
            _cancellationToken = cancellationToken;
            Interlocked.Exchange(ref _state, Waiting);
            return _version;
        }

        /// <summary>The second look found progress: back to Idle, unless a signal came first (then the wait is complete).</summary>
        public bool TryAbandon() => Interlocked.CompareExchange(ref _state, Idle, Waiting) == Waiting;

        /// <summary>After a wait that will be awaited: the token, when it can fire, signals it.</summary>
        public void Register(object owner, Action<object?> onTokenCanceled)
        {
            if (_cancellationToken.CanBeCanceled)
            {
                _registration = _cancellationToken.UnsafeRegister(onTokenCanceled, owner);
            }
        }

        /// <summary>The token fired (its callback): the wait completes with a cancellation.</summary>
        public void OnTokenCanceled(PipeScheduler scheduler)
        {
            Volatile.Write(ref _tokenCanceled, 1);
            Signal(scheduler);
        }

        public void Check(short version)
        {
            if (version != _version)
            {
                throw new InvalidOperationException("The pipe's result was already consumed: a ValueTask of a read or a flush may be awaited once.");
            }
        }

        /// <summary>The status of the wait <paramref name="version"/>; <paramref name="faulted"/>: its result would throw.</summary>
        public ValueTaskSourceStatus Status(short version, bool faulted)
        {
            Check(version);
            if (!IsSignaled)
            {
                return ValueTaskSourceStatus.Pending;
            }
            if (TokenCanceled)
            {
                return ValueTaskSourceStatus.Canceled;
            }
            return faulted ? ValueTaskSourceStatus.Faulted : ValueTaskSourceStatus.Succeeded;
        }

        /// <summary>Ends the wait <paramref name="version"/> for its result; throws when its token cancelled it.</summary>
        public void Consume(short version)
        {
            Check(version);
            var canceled = TokenCanceled;
            var cancellationToken = _cancellationToken;
            End();
            if (canceled)
            {
                throw new OperationCanceledException(cancellationToken);
            }
        }

        public void OnCompleted(Action<object?> continuation, object? state, ValueTaskSourceOnCompletedFlags flags, PipeScheduler scheduler)
        {
            _continuation = continuation;
            _continuationState = state;
            _context = (flags & ValueTaskSourceOnCompletedFlags.FlowExecutionContext) != 0 ? ExecutionContext.Capture() : null;
            if (Interlocked.CompareExchange(ref _state, Parked, Waiting) != Waiting)
            {
                // Signaled before the continuation was stored: nobody else will run it.
                RunContinuation(scheduler);
            }
        }

        /// <summary>Completes a wait in progress (the other end made progress, a cancel, the token); false when none is.</summary>
        public bool Signal(PipeScheduler scheduler)
        {
            while (true)
            {
                var state = Volatile.Read(ref _state);
                if (state is Idle or Signaled)
                {
                    return false;
                }
                if (Interlocked.CompareExchange(ref _state, Signaled, state) == state)
                {
                    if (state == Parked)
                    {
                        RunContinuation(scheduler);
                    }
                    return true;
                }
            }
        }

        /// <summary>The waiting end took its result: back to Idle, the token's registration gone.</summary>
        public void End()
        {
            // NOTE: Dispose, not Unregister: a callback already running must be done before the next wait starts, or its
            // signal would complete that one.
            _registration.Dispose();
            _registration = default;
            _cancellationToken = default;
            _version++; // the ValueTask of this wait is spent
            Volatile.Write(ref _state, Idle);
        }

        /// <summary>Pipe reset (both ends completed, nobody waits).</summary>
        public void Reset()
        {
            _registration.Dispose();
            _registration = default;
            _cancellationToken = default;
            _continuation = null;
            _continuationState = null;
            _context = null;
            _tokenCanceled = 0;
            _state = Idle;
        }

        private void RunContinuation(PipeScheduler scheduler)
        {
            var continuation = _continuation!;
            var state = _continuationState;
            var context = _context;
            _continuation = null;
            _continuationState = null;
            _context = null;
            Schedule(scheduler, continuation, state, context);
        }
    }
}
