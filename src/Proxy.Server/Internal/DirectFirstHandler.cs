namespace Proxy.Server.Internal;

/// <summary>Offers each exchange to the direct handler first; the application gets the ones it declines.</summary>
// Stateless and shared by all connections.
internal sealed class DirectFirstHandler(IDirectRequestHandler direct, IHttpRequestHandler application) : IHttpRequestHandler
{
    public Task HandleAsync(HttpExchange exchange) => direct.TryHandle(exchange) ?? application.HandleAsync(exchange);
}
