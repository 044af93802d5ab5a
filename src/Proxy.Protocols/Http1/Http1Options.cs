namespace Proxy.Protocols.Http1;

/// <summary>HTTP/1.1 limits. Defaults follow Kestrel.</summary>
public sealed class Http1Options
{
    /// <summary>Longest request line (method, target, version).</summary>
    public int MaxRequestLineSize { get; set; } = 8 * 1024;
    /// <summary>Total bytes of the header section.</summary>
    public int MaxRequestHeadersTotalSize { get; set; } = 32 * 1024;
    public int MaxRequestHeaderCount { get; set; } = 100;
    /// <summary>Time to receive the whole request line and headers (slowloris).</summary>
    public TimeSpan RequestHeadersTimeout { get; set; } = TimeSpan.FromSeconds(30);
    /// <summary>Idle time between requests on a kept-alive connection.</summary>
    public TimeSpan KeepAliveTimeout { get; set; } = TimeSpan.FromSeconds(130);
    /// <summary>
    /// Request body bytes the server reads and discards after the app finished without reading
    /// them, to keep the connection; a larger remainder closes the connection instead. The drain
    /// is bounded in time by <see cref="RequestHeadersTimeout"/>.
    /// </summary>
    public long MaxRequestBodyDrainSize { get; set; } = 64 * 1024;
}
