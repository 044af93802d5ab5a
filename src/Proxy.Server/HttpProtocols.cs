namespace Proxy.Server;

/// <summary>The HTTP versions an endpoint speaks.</summary>
[Flags]
public enum HttpProtocols
{
    None = 0,
    Http1 = 1,
    Http2 = 2,
    Http1AndHttp2 = Http1 | Http2,
}
