using System.Runtime.CompilerServices;
using System.Threading.Tasks.Sources;
using Proxy.Forwarding.Forwarder;
using Proxy.Protocols.Client;

namespace Proxy.Relay;

/// <summary>
/// One forwarded exchange on the native relay: the forwarder's view (<see cref="ForwarderBackendCall"/>) of a
/// <see cref="BackendExchange"/> on a pooled connection. A request the backend refused before processing it
/// (REFUSED_STREAM, or beyond its GOAWAY's last stream id: RFC 9113 §8.7, §6.8) is sent again on another connection,
/// when its whole body is still at hand.
/// </summary>
// Owned by one forwarded request (the forwarder's request pump writes RequestBody, its response flow the rest).
internal sealed class NativeBackendCall(BackendPool pool, BackendRequest request, Proxy.Protocols.HttpExchange? client)
    : ForwarderBackendCall, IValueTaskSource, IClientResponseSink
{
    // NOTE: kept only until the response head arrives (a refused request is sent again from it), then let go: an SSE
    // stream lives for hours, and the request with its field list is a few hundred bytes.
    private BackendRequest? _request = request;
    /// <summary>Attempts beyond the first for a refused request.</summary>
    private const int MaxRetries = 2;
    // Only requests with a body need a replay copy: a GET or an SSE request allocates none.
    private readonly ReplayableRequestBody? _requestBody = request.HasBody ? new() : null;
    private BackendExchange _exchange = null!;
    private bool _reusedHttp1;
    private int _retries;
    // The response head the forwarder waits for: this call is its one-shot source. The exchange's head completes into
    // OnHeadCompleted, which completes this one inline (the forwarder continues where the exchange's head completed, as
    // an await would); only a refused request goes through an async retry. An async method here was a state-machine box
    // and one more continuation per request.
    private ManualResetValueTaskSourceCore<bool> _head;
    private ConfiguredValueTaskAwaitable.ConfiguredValueTaskAwaiter _headWait;
    private CancellationToken _headToken;

    // NOTE: completes without a state machine when the pool had a connection ready and the head went out at once (the
    // common case); only an open that waits (a connect, a full pool, a flush) goes async.
    public ValueTask OpenAsync(CancellationToken cancellationToken)
    {
        var open = pool.OpenAsync(_request!, cancellationToken);
        if (!open.IsCompletedSuccessfully)
        {
            return OpenWaitingAsync(open);
        }
        Opened(open.Result);
        return default;
    }

    private async ValueTask OpenWaitingAsync(ValueTask<(BackendExchange Exchange, bool ReusedHttp1)> open) =>
        Opened(await open.ConfigureAwait(false));

    private void Opened((BackendExchange Exchange, bool ReusedHttp1) opened)
    {
        (_exchange, _reusedHttp1) = opened;
        _requestBody?.Target = _exchange.RequestBody;
    }

    /// <summary>
    /// Sent again elsewhere: a request the backend refused unprocessed, or one whose kept-alive HTTP/1.1 connection the
    /// backend had closed while it was idle (the close raced our request; RFC 9112 §9.3.1 lets a client retry then).
    /// </summary>
    private bool IsRetryable(BackendException error) =>
        error.Failure == BackendFailure.Refused
        || (_reusedHttp1 && error.Failure == BackendFailure.ConnectionLost
            && _request!.Method is "GET" or "HEAD" or "OPTIONS" or "PUT" or "DELETE" or "TRACE"); // idempotent only (RFC 9110 §9.2.2)

    public override PipeWriter RequestBody => _requestBody ?? _exchange.RequestBody;

    // The client's exchange behind the request's HttpContext (the pipeline on our server, its response body unwrapped):
    // the response pump writes in its blocks and lends to it. This call is the sink, so the pipeline pays no object for it.
    internal override IClientResponseSink? ClientResponse => client is null ? null : this;

    int IClientResponseSink.BlockSize => client!.ResponseBodyBlockSize;

    bool IClientResponseSink.CanLend => client!.CanLendResponseBody;

    ValueTask<bool> IClientResponseSink.LendAsync(System.Buffers.ReadOnlySequence<byte> body) => client!.LendResponseBodyAsync(body);

    void IClientResponseSink.Revoke() => client!.RevokeLentResponseBody();

    public override ValueTask ReadResponseHeadAsync(CancellationToken cancellationToken)
    {
        var head = _exchange.ReadResponseHeadAsync(cancellationToken);
        if (head.IsCompleted)
        {
            try
            {
                head.GetAwaiter().GetResult();
            }
            catch (BackendException ex) when (CanRetry(ex))
            {
                return ReadAfterRetriesAsync(cancellationToken);
            }
            catch (Exception ex)
            {
                return ValueTask.FromException(ex);
            }
            OnHeadArrived();
            return default;
        }

        _headToken = cancellationToken;
        _headWait = head.ConfigureAwait(false).GetAwaiter();
        _headWait.UnsafeOnCompleted(OnHeadCompleted);
        return new ValueTask(this, _head.Version);
    }

    private void OnHeadCompleted()
    {
        var wait = _headWait;
        _headWait = default;
        try
        {
            wait.GetResult();
        }
        catch (BackendException ex) when (CanRetry(ex))
        {
            _ = CompleteAfterRetriesAsync();
            return;
        }
        catch (Exception ex)
        {
            _head.SetException(ex);
            return;
        }
        OnHeadArrived();
        _head.SetResult(true);
    }

    private async Task CompleteAfterRetriesAsync()
    {
        try
        {
            await ReadAfterRetriesAsync(_headToken).ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            _head.SetException(ex);
            return;
        }
        _head.SetResult(true);
    }

    private bool CanRetry(BackendException error) => IsRetryable(error) && _retries < MaxRetries && _requestBody?.CanReplay != false;

    /// <summary>The request was refused unprocessed: sent again on another exchange, until a head arrives or retrying ends.</summary>
    private async ValueTask ReadAfterRetriesAsync(CancellationToken cancellationToken)
    {
        while (true)
        {
            _retries++;
            // NOTE: let go of before it is disposed: a disposed exchange may be reused by another request (pooled streams),
            // so a failed open below must not leave it here for Abort or DisposeAsync to reach.
            var refused = _exchange;
            _exchange = null!;
            await refused.DisposeAsync().ConfigureAwait(false);
            (_exchange, _reusedHttp1) = await pool.OpenAsync(_request!, cancellationToken).ConfigureAwait(false);
            if (_requestBody is not null)
            {
                await _requestBody.ReplayIntoAsync(_exchange.RequestBody, cancellationToken).ConfigureAwait(false);
            }
            try
            {
                await _exchange.ReadResponseHeadAsync(cancellationToken).ConfigureAwait(false);
                OnHeadArrived();
                return;
            }
            catch (BackendException ex) when (CanRetry(ex))
            {
            }
        }
    }

    private void OnHeadArrived()
    {
        _requestBody?.StopRecording();
        _request = null;
    }

    void IValueTaskSource.GetResult(short token) => _head.GetResult(token);

    ValueTaskSourceStatus IValueTaskSource.GetStatus(short token) => _head.GetStatus(token);

    void IValueTaskSource.OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _head.OnCompleted(continuation, state, token, flags);

    public override int StatusCode => _exchange.StatusCode;

    public override IReadOnlyList<KeyValuePair<string, string>> ResponseHeaders => _exchange.ResponseHeaders;

    public override PipeReader ResponseBody => _exchange.ResponseBody;

    public override IReadOnlyList<KeyValuePair<string, string>> ResponseTrailers => _exchange.ResponseTrailers;

    public override void Abort(uint errorCode = 0x8) => Volatile.Read(ref _exchange)?.Abort(errorCode);

    // NOTE: taken out before it is disposed: a disposed exchange may serve another request (pooled streams), which a
    // second DisposeAsync or a late Abort from here must never reach.
    public override ValueTask DisposeAsync() => Interlocked.Exchange(ref _exchange, null!)?.DisposeAsync() ?? ValueTask.CompletedTask;

    /// <summary>
    /// The request body writer the forwarder sees: bytes go to the current exchange, and a copy of up to
    /// <see cref="MaxReplayBytes"/> is kept until the response head arrives, so a refused request can be sent again.
    /// </summary>
    // Owned by the forwarder's request pump (writes) and, once the pump completed, the retry in ReadResponseHeadAsync.
    private sealed class ReplayableRequestBody : PipeWriter
    {
        private const int MaxReplayBytes = 64 * 1024;
        private byte[]? _replay;
        private int _replayLength;
        private bool _recording = true;
        private bool _overflowed;
        private volatile bool _completed;
        private Memory<byte> _lastMemory;

        public PipeWriter Target { get; set; } = null!;

        /// <summary>Nothing was lost: the whole body was written and fit the replay buffer.</summary>
        public bool CanReplay => _completed && !_overflowed;

        /// <summary>
        /// The head arrived: nothing will be replayed. The copy goes back to the pool when the pump has finished writing
        /// (the common case: a small body is complete before the head comes back); a pump still writing (a streaming
        /// upload) may be copying into it, so then it is only dropped.
        /// </summary>
        public void StopRecording()
        {
            _recording = false;
            var replay = _replay;
            _replay = null;
            if (replay is not null && _completed)
            {
                ArrayPool<byte>.Shared.Return(replay);
            }
        }

        public async ValueTask ReplayIntoAsync(PipeWriter target, CancellationToken cancellationToken)
        {
            Target = target;
            if (_replayLength > 0)
            {
                await target.WriteAsync(_replay.AsMemory(0, _replayLength), cancellationToken).ConfigureAwait(false);
            }
            await target.CompleteAsync().ConfigureAwait(false);
        }

        // NOTE: the copy is rented (ArrayPool): a new array per request was 2 KB of a forwarded 1 KB POST's 6 KB of
        // allocations. Only this pump returns it while it writes (growing, overflowing); StopRecording returns it only
        // once the pump completed, so an array is never handed back while a copy into it may run.
        public override void Advance(int bytes)
        {
            if (_recording && !_overflowed)
            {
                var replay = _replay;
                if (_replayLength + bytes > MaxReplayBytes)
                {
                    _overflowed = true;
                    _replay = null;
                    if (replay is not null)
                    {
                        ArrayPool<byte>.Shared.Return(replay);
                    }
                }
                else
                {
                    if (replay is null || replay.Length < _replayLength + bytes)
                    {
                        var grown = ArrayPool<byte>.Shared.Rent(Math.Min(MaxReplayBytes, Math.Max(Math.Max(256, (replay?.Length ?? 0) * 2), _replayLength + bytes)));
                        if (replay is not null)
                        {
                            replay.AsSpan(0, _replayLength).CopyTo(grown);
                            ArrayPool<byte>.Shared.Return(replay);
                        }
                        replay = grown;
                    }
                    _lastMemory.Span[..bytes].CopyTo(replay.AsSpan(_replayLength));
                    _replayLength += bytes;
                    if (_recording)
                    {
                        _replay = replay; // else the head arrived meanwhile: the copy is dropped, not returned
                    }
                }
            }
            Target.Advance(bytes);
        }

        public override Memory<byte> GetMemory(int sizeHint = 0) => _lastMemory = Target.GetMemory(sizeHint);

        public override Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;

        public override void CancelPendingFlush() => Target.CancelPendingFlush();

        // NOTE: the target is read before the body is published as complete: a retry that sees it complete replays into
        // a new exchange's body, and this completion must still go to the old one.
        public override void Complete(Exception? exception = null)
        {
            var target = Target;
            _completed = exception is null;
            target.Complete(exception);
        }

        public override ValueTask CompleteAsync(Exception? exception = null)
        {
            var target = Target;
            _completed = exception is null;
            return target.CompleteAsync(exception);
        }

        public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default) => Target.FlushAsync(cancellationToken);
    }
}
