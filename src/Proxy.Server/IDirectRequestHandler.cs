namespace Proxy.Server;

/// <summary>
/// Takes requests before the ASP.NET Core application sees them: the proxy's direct path (Proxy.Relay) answers the
/// requests of routes that need nothing from the pipeline straight from the engine's exchange. Register one in DI;
/// <see cref="ProxyServer"/> asks it about every request, and the app gets the ones it declines.
/// </summary>
public interface IDirectRequestHandler
{
    /// <summary>
    /// Decides at once, without waiting, whether to handle <paramref name="exchange"/>: returns the task that handles it
    /// (and completes the response), or null to hand it to the application. A request it takes never reaches the app,
    /// its middleware or its HttpContext.
    /// </summary>
    Task? TryHandle(HttpExchange exchange);
}
