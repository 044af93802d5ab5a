namespace Proxy.Protocols;

/// <summary>
/// A request handler that can take some requests on the connection's event loop, without waking another thread: the
/// proxy's direct path, whose code never blocks. The HTTP/2 engine offers it each new stream at the end of the read
/// loop's batch of events (when the connection's <see cref="ConnectionMetadata.Scheduler"/> runs an event loop on that
/// thread); the streams it declines go to the thread pool and <see cref="Declined"/>. Elsewhere the engine calls
/// <see cref="IHttpRequestHandler.HandleAsync"/> as for any handler.
/// </summary>
public interface IEventLoopRequestHandler : IHttpRequestHandler
{
    /// <summary>
    /// On the event loop: decides at once, without waiting, whether to take <paramref name="exchange"/>. Returns the
    /// task that handles it (its code up to its first wait runs on the loop, and so does whatever resumes it there), or
    /// null to decline.
    /// </summary>
    Task? TryHandleOnEventLoop(HttpExchange exchange);

    /// <summary>Handles, on the thread pool, the exchanges <see cref="TryHandleOnEventLoop"/> declined.</summary>
    IHttpRequestHandler Declined { get; }
}
