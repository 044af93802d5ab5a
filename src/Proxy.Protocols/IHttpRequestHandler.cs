namespace Proxy.Protocols;

/// <summary>
/// The seam between protocol engines and the host (Proxy.Server implements it over ASP.NET Core).
/// Engines call <see cref="HandleAsync"/> once per request. HTTP/2 calls it on a thread-pool
/// thread, never on the connection's read or writer loop (other streams share them); HTTP/1.1,
/// which has one exchange at a time, calls it on the connection's own loop, as Kestrel does, and
/// watches for a disconnect meanwhile. When the returned task completes the engine finishes
/// the response (<see cref="HttpExchange.CompleteAsync"/> if the handler did not).
/// </summary>
public interface IHttpRequestHandler
{
    Task HandleAsync(HttpExchange exchange);
}
