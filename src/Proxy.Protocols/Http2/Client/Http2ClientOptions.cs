namespace Proxy.Protocols.Http2.Client;

/// <summary>
/// Options of our HTTP/2 client connections (the proxy's backend side). The frame-level limits and windows are an
/// <see cref="Http2Options"/> shared in shape with the server side; the rest is what only a client decides.
/// </summary>
public sealed class Http2ClientOptions
{
    /// <summary>
    /// Windows, frame and header limits, writer batching and the write timeout. Defaults: the server's, except a
    /// 4 MiB connection window (many relayed streams share one backend connection; one stream can still hold at
    /// most its own 768 KiB window, so the bytes a slow client pins stay bounded per stream).
    /// </summary>
    public Http2Options Protocol { get; set; } = new() { InitialConnectionWindowSize = 4 * 1024 * 1024 };

    /// <summary>Streams we open before the backend's SETTINGS tell us its limit (RFC 9113 §5.1.2 leaves it unlimited until then; HttpClient assumes 100).</summary>
    public int InitialMaxConcurrentStreams { get; set; } = 100;

    /// <summary>
    /// Our own ceiling on streams per connection, whatever the backend allows (grpc-go and Envoy advertise no limit): the
    /// writer's bounded queues are sized from it, and the pool opens another connection beyond it.
    /// </summary>
    public int MaxStreamsPerConnection { get; set; } = 100;

    /// <summary>A PING goes out after this long without any frame from the backend; <see cref="Timeout.InfiniteTimeSpan"/> disables keep-alive pings.</summary>
    public TimeSpan KeepAlivePingDelay { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>A backend that does not answer a keep-alive PING within this long is dead: the connection is closed and its streams fail.</summary>
    public TimeSpan KeepAlivePingTimeout { get; set; } = TimeSpan.FromSeconds(20);

    /// <summary>Time the backend has to send its SETTINGS after we connected (its preface, RFC 9113 §3.4).</summary>
    public TimeSpan PrefaceTimeout { get; set; } = TimeSpan.FromSeconds(10);
}
