using Proxy.Protocols.Http1;

namespace Proxy.Server.Internal;

// Owned by the connection's flow; ShutdownAsync comes from StopAsync, request callbacks from the
// engine's handler calls. The drain state is guarded by _lock.
/// <summary>
/// HTTP/1.1 engine behind the server seam, with graceful shutdown the engine itself does not
/// have: an idle connection closes at once; a busy one answers its current request with
/// "Connection: close" semantics and closes right after it (RFC 9112 §9.6).
/// </summary>
internal sealed class Http1Protocol : IConnectionProtocol, IHttpRequestHandler
{
    private readonly Http1Connection _connection;
    private readonly IHttpRequestHandler _inner;
    private readonly Lock _lock = new();
    private int _inFlight;
    private bool _draining;

    public Http1Protocol(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
    {
        _inner = handler;
        _connection = new Http1Connection(transport, options, this, metadata, time);
    }

    public Task ProcessAsync(CancellationToken abort) => _connection.ProcessAsync(abort);

    public Task ShutdownAsync()
    {
        bool idle;
        lock (_lock)
        {
            _draining = true;
            idle = _inFlight == 0;
        }
        if (idle)
        {
            _connection.Abort(); // Between requests: nothing is lost by closing now.
        }
        return Task.CompletedTask;
    }

    async Task IHttpRequestHandler.HandleAsync(HttpExchange exchange)
    {
        lock (_lock)
        {
            _inFlight++;
            if (_draining)
            {
                // RFC 9112 §9.6: announce the close so the client does not reuse the connection.
                exchange.ResponseHeaders.Add("Connection", "close");
            }
        }
        try
        {
            await _inner.HandleAsync(exchange).ConfigureAwait(false);
        }
        finally
        {
            bool closeNow;
            lock (_lock)
            {
                _inFlight--;
                closeNow = _draining && _inFlight == 0;
            }
            if (closeNow)
            {
                // The handler completed the response (flushed); the next request would not be served.
                _connection.Abort();
            }
        }
    }
}
