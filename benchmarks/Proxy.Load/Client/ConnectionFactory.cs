using System.Net.Security;

namespace Proxy.Load.Client;

/// <summary>
/// One <see cref="SocketsHttpHandler"/> per connection, so "connections x streams" is what goes on the wire:
/// HTTP/2 never opens a second connection (EnableMultipleHttp2Connections = false), HTTP/1.1 gets exactly
/// <c>maxConnections</c>. Certificates are not verified (targets use self-signed ones).
/// </summary>
public static class ConnectionFactory
{
    public static HttpMessageInvoker Create(int maxConnections)
    {
        var handler = new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = false,
            MaxConnectionsPerServer = maxConnections,
            PooledConnectionLifetime = Timeout.InfiniteTimeSpan,
            PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
            UseProxy = false,
            UseCookies = false,
            AllowAutoRedirect = false,
            AutomaticDecompression = System.Net.DecompressionMethods.None,
            // No traceparent header on every request: it is work the target would not see from a real load tool.
            ActivityHeadersPropagator = null,
            SslOptions = new SslClientAuthenticationOptions { RemoteCertificateValidationCallback = static (_, _, _, _) => true },
        };

        // HttpMessageInvoker, not HttpClient: no per-request timeout CTS, and SendAsync returns as soon as the
        // response headers arrive (what HttpClient does with HttpCompletionOption.ResponseHeadersRead).
        return new HttpMessageInvoker(handler, disposeHandler: true);
    }

    public static HttpRequestMessage Request(HttpMethod method, Uri uri, Version version) => new(method, uri)
    {
        Version = version,
        // Exact: h2c is prior knowledge over http://, h2 needs ALPN h2 over https://; never a silent downgrade.
        VersionPolicy = HttpVersionPolicy.RequestVersionExact,
    };
}
