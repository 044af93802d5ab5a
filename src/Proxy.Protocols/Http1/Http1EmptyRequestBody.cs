namespace Proxy.Protocols.Http1;

/// <summary>
/// The body of a request without one (no Content-Length, no Transfer-Encoding: RFC 9112 §6.3): every read
/// returns an empty, completed result at once, without a pipe or a pump. It behaves like the reader of a pipe
/// whose writer has completed: a CancelPendingRead marks the next result cancelled, and reading after
/// <see cref="Complete"/> throws.
/// </summary>
// Owned by the app that handles the exchange (one reader at a time, like any PipeReader).
internal sealed class Http1EmptyRequestBody : PipeReader
{
    private bool _completed;
    private bool _cancelPending;

    /// <summary>Readies the reader for the connection's next request.</summary>
    public void Reset()
    {
        _completed = false;
        _cancelPending = false;
    }

    public override ValueTask<ReadResult> ReadAsync(CancellationToken cancellationToken = default)
    {
        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<ReadResult>(cancellationToken);
        }
        return new ValueTask<ReadResult>(Read());
    }

    public override bool TryRead(out ReadResult result)
    {
        result = Read();
        return true;
    }

    public override void AdvanceTo(SequencePosition consumed) => ThrowIfCompleted();

    public override void AdvanceTo(SequencePosition consumed, SequencePosition examined) => ThrowIfCompleted();

    public override void CancelPendingRead() => _cancelPending = true;

    public override void Complete(Exception? exception = null) => _completed = true;

    private ReadResult Read()
    {
        ThrowIfCompleted();
        var canceled = _cancelPending;
        _cancelPending = false;
        return new ReadResult(ReadOnlySequence<byte>.Empty, canceled, isCompleted: true);
    }

    private void ThrowIfCompleted()
    {
        if (_completed)
        {
            throw new InvalidOperationException("Reading is not allowed after the reader was completed.");
        }
    }
}
