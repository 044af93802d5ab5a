namespace Proxy.Server.Internal;

// Owned by the server's connection table: created at accept, removed when the connection ends.
// Protocol is set once by the connection's own flow; RequestShutdown/Abort come from StopAsync.
/// <summary>A live connection as the server tracks it for graceful shutdown.</summary>
internal sealed class ServerConnection(ConnectionContext context) : IDisposable
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
}
