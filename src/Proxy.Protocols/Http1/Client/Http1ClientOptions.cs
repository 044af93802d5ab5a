using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http1.Client;

/// <summary>Limits of an HTTP/1.1 client connection to a backend (the server's limits, mirrored).</summary>
public sealed class Http1ClientOptions
{
    /// <summary>Status line plus header fields of one response head; also the bound of a chunked body's trailer section.</summary>
    public int MaxResponseHeadSize { get; set; } = 64 * 1024;

    /// <summary>Header fields of one response head; also the bound of a chunked body's trailer fields.</summary>
    public int MaxResponseHeaderCount { get; set; } = 100;

    internal Http1ResponseLimits Limits => new(MaxResponseHeadSize, MaxResponseHeaderCount);
}
