namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// Where a native transport reports the backend connections it opens and closes (the forwarding layer counts them as
/// <c>proxy.forwarding.backend.connections</c>). Resolve it from DI; calls must pair (one close per open, same values).
/// </summary>
/// <remarks>
/// NOTE: the HttpClient path cannot report here: SocketsHttpHandler opens and closes its connections internally. Its own
/// meter ("System.Net.Http", <c>http.client.open_connections</c>) counts them by server address and protocol version.
/// </remarks>
public interface IBackendConnectionMetrics
{
    /// <param name="protocolVersion">"1.1" or "2".</param>
    void ConnectionOpened(string clusterId, string destinationId, string protocolVersion);

    void ConnectionClosed(string clusterId, string destinationId, string protocolVersion);
}
