namespace Proxy.Server.Internal;

/// <summary>Offers each exchange to the direct handler first; the application gets the ones it declines.</summary>
// Stateless and shared by all connections.
// NOTE: an HTTP/2 engine on an event loop offers new streams to the direct handler there (IEventLoopRequestHandler): the
// direct path's code never blocks; the app gets the ones it declines on the thread pool.
internal sealed class DirectFirstHandler(IDirectRequestHandler direct, IHttpRequestHandler application) : IEventLoopRequestHandler
{
    public Task HandleAsync(HttpExchange exchange) => direct.TryHandle(exchange) ?? application.HandleAsync(exchange);

    public Task? TryHandleOnEventLoop(HttpExchange exchange) => direct.TryHandle(exchange);

    public IHttpRequestHandler Declined => application;
}
