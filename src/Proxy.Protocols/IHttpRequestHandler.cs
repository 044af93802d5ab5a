namespace Proxy.Protocols;

/// <summary>
/// The seam between protocol engines and the host (Proxy.Server implements it over ASP.NET Core).
/// Engines call <see cref="HandleAsync"/> once per request, on a thread-pool thread, never on
/// the connection's read or writer loop. When the returned task completes the engine finishes
/// the response (<see cref="HttpExchange.CompleteAsync"/> if the handler did not).
/// </summary>
public interface IHttpRequestHandler
{
    Task HandleAsync(HttpExchange exchange);
}
