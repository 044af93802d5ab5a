using Proxy.Codecs.Http2;

namespace Proxy.Server.Internal;

// Owned by the server's connection table: created at accept, removed when the connection ends.
// Protocol is set once by the connection's own flow; RequestShutdown/Abort come from StopAsync.
// The metrics fields are written by the connection's own flow (and the HTTP/2 loops for EndReason, first one wins).
/// <summary>A live connection as the server tracks it for graceful shutdown and metrics.</summary>
/// <remarks>
/// It is also the engine's <see cref="IProtocolMetrics"/>: calls pass straight to the server's shared
/// <see cref="ServerMetrics"/>, and a GOAWAY we send with an error code becomes the connection's error.type.
/// </remarks>
internal sealed class ServerConnection(ConnectionContext context, ServerMetrics? metrics = null, KeyValuePair<string, object?>[]? endpointTags = null)
    : IDisposable, IProtocolMetrics
{
    private readonly CancellationTokenSource _abort = new();
    private readonly Lock _lock = new();
    private IConnectionProtocol? _protocol;
    private bool _shutdownRequested;

    public ConnectionContext Context { get; } = context;

    /// <summary>Fires when the server gives up waiting and tears the connection down.</summary>
    public CancellationToken Aborted => _abort.Token;

    private readonly TaskCompletionSource _completion = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Completes when the connection's flow ended.</summary>
    public Task Completion => _completion.Task;

    public void MarkCompleted() => _completion.TrySetResult();

    /// <summary>Registers the engine; when a shutdown was already requested it is passed on at once.</summary>
    public void SetProtocol(IConnectionProtocol protocol)
    {
        bool shutdown;
        lock (_lock)
        {
            _protocol = protocol;
            shutdown = _shutdownRequested;
        }
        if (shutdown)
        {
            _ = protocol.ShutdownAsync();
        }
    }

    /// <summary>Graceful: the engine finishes what it started (GOAWAY for HTTP/2).</summary>
    public void RequestShutdown()
    {
        IConnectionProtocol? protocol;
        lock (_lock)
        {
            _shutdownRequested = true;
            protocol = _protocol;
        }
        if (protocol is not null)
        {
            _ = protocol.ShutdownAsync();
        }
        else
        {
            // Still in the TLS handshake or protocol detection: nothing started, so nothing to lose.
            Abort();
        }
    }

    public void Abort()
    {
        try
        {
            _abort.Cancel();
        }
        catch (ObjectDisposedException)
        {
        }
        Context.Abort(new ConnectionAbortedException("The server is shutting down."));
    }

    public void Dispose() => _abort.Dispose();

    // ---- Metrics ----

    /// <summary>The server's metrics, or null when the host has no IMeterFactory.</summary>
    public ServerMetrics? Metrics { get; } = metrics;

    /// <summary>Kestrel's endpoint attributes of the listener that accepted the connection.</summary>
    public KeyValuePair<string, object?>[] EndpointTags { get; } = endpointTags ?? [];

    public long StartTimestamp { get; } = System.Diagnostics.Stopwatch.GetTimestamp();

    /// <summary>Whether kestrel.active_connections counted the connection (its end takes back exactly that).</summary>
    public bool CountedActive { get; set; }

    /// <summary>"1.1" or "2" once the protocol is chosen.</summary>
    public string? ProtocolVersion { get; set; }

    private string? _endReason;

    /// <summary>The connection's error.type (first one wins), or null for a clean end.</summary>
    public string? EndReason => Volatile.Read(ref _endReason);

    public void SetEndReason(string reason) => Interlocked.CompareExchange(ref _endReason, reason, null);

    bool IProtocolMetrics.StreamStarted() => Metrics!.StreamStarted();

    void IProtocolMetrics.StreamEnded() => Metrics!.StreamEnded();

    void IProtocolMetrics.StreamReset(bool sent, Http2ErrorCode code) => Metrics!.StreamReset(sent, code);

    void IProtocolMetrics.StreamRefused() => Metrics!.StreamRefused();

    void IProtocolMetrics.GoAway(bool sent, Http2ErrorCode code)
    {
        if (sent && code != Http2ErrorCode.NoError)
        {
            SetEndReason(ServerMetrics.ErrorCodeName(code).ToLowerInvariant());
        }
        Metrics!.GoAway(sent, code);
    }

    bool IProtocolMetrics.FlowControlStallEnabled => Metrics!.FlowControlStallEnabled;

    void IProtocolMetrics.FlowControlStalled(TimeSpan duration) => Metrics!.FlowControlStalled(duration);

    bool IProtocolMetrics.WriterBatchEnabled => Metrics!.WriterBatchEnabled;

    void IProtocolMetrics.WriterBatch(int frames, long bytes) => Metrics!.WriterBatch(frames, bytes);
}
