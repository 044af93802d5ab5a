using Proxy.Forwarding.Forwarder;

namespace Proxy.Relay.Direct;

/// <summary>
/// Sees each request the direct path forwarded, once it ended: what middleware around the proxy endpoints would have seen
/// on the pipeline (the standalone proxy's access log registers one). Register it in DI; with none registered, and nothing
/// listening to <c>http.server.request.duration</c> (which the direct path records as the hosting layer does), the direct
/// path neither times nor counts anything.
/// </summary>
public interface IDirectRequestObserver
{
    /// <summary>
    /// Called once per direct request, on the request's flow, after the response completed or broke. Must not throw, and
    /// must not block: on our epoll engine the direct path runs on the event loop that read the request or the response,
    /// where every other connection of that thread waits for it (hand slow work, such as writing to a file, to a queue).
    /// </summary>
    void RequestEnded(in DirectRequestRecord record);
}

/// <summary>One direct-path request as it ended.</summary>
/// <param name="Path">The decoded path, as ASP.NET Core's Request.Path (never the query).</param>
/// <param name="Protocol">"HTTP/2" or "HTTP/1.1".</param>
/// <param name="BytesIn">Request body bytes the forwarder consumed.</param>
/// <param name="BytesOut">Response body bytes written to the client.</param>
public readonly record struct DirectRequestRecord(string Method, string Path, string Protocol, int StatusCode, string RouteId, string ClusterId,
    string? DestinationId, TimeSpan Duration, long BytesIn, long BytesOut, ForwarderError Outcome);
