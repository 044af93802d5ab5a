namespace Proxy.Protocols.Http2;

/// <summary>
/// The round-robin scheduler of streams with output ready: a stream joins the queue once (its
/// <see cref="Http2SendState.InReadyQueue"/> flag), and each pass gives every stream queued at its start one turn; a stream
/// with more ready after its turn goes to the back, so one busy stream cannot starve the others.
/// </summary>
/// <remarks>
/// The turn itself (HEADERS once, at most one DATA frame) is the writer loop's, handed in once as a delegate: a pass
/// allocates nothing.
/// </remarks>
// Owned by the frame-writer loop: only its thread touches it.
internal sealed class StreamScheduler
{
    private readonly Queue<IHttp2OutputSource> _ready = new();
    private readonly Func<IHttp2OutputSource, bool> _takeTurn;

    /// <param name="takeTurn">Writes a stream's next frames; returns true when the stream has more ready now.</param>
    public StreamScheduler(Func<IHttp2OutputSource, bool> takeTurn) => _takeTurn = takeTurn;

    /// <summary>Whether a stream waits for its turn.</summary>
    public bool HasReady => _ready.Count > 0;

    /// <summary>Queues a stream for a turn, unless its output stopped or it is queued already.</summary>
    public void Schedule(IHttp2OutputSource stream)
    {
        if (!stream.Send.OutputStopped && !stream.Send.InReadyQueue)
        {
            stream.Send.InReadyQueue = true;
            _ready.Enqueue(stream);
        }
    }

    /// <summary>One round-robin pass: every stream ready at its start gets one turn.</summary>
    public void ServicePass()
    {
        var turns = _ready.Count;
        for (var i = 0; i < turns && _ready.Count > 0; i++)
        {
            var stream = _ready.Dequeue();
            stream.Send.InReadyQueue = false;
            if (_takeTurn(stream))
            {
                Schedule(stream);
            }
        }
    }

    /// <summary>Takes the next queued stream out without a turn (the connection is ending).</summary>
    public bool TryRemoveNext([System.Diagnostics.CodeAnalysis.NotNullWhen(true)] out IHttp2OutputSource? stream)
    {
        if (_ready.TryDequeue(out stream))
        {
            stream.Send.InReadyQueue = false;
            return true;
        }
        return false;
    }
}
