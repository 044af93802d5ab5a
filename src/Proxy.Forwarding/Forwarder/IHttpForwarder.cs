using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Transforms;

namespace Proxy.Forwarding.Forwarder;

/// <summary>
/// Forwards one request to a destination and streams the response back. The direct API for one-off
/// routes; the configured routes use it too.
/// </summary>
public interface IHttpForwarder
{
    /// <summary>
    /// Forwards the request in <paramref name="context"/> to <paramref name="destinationPrefix"/>
    /// (e.g. <c>http://127.0.0.1:5001/</c>) through <paramref name="httpClient"/>. On failure before the
    /// response started, sets a 502/503/504 (or a trailers-only gRPC status); after, resets or aborts
    /// the client stream. The outcome is returned and stored in <see cref="IForwarderErrorFeature"/>.
    /// </summary>
    ValueTask<ForwarderError> SendAsync(HttpContext context, string destinationPrefix, HttpMessageInvoker httpClient,
        ForwarderRequestConfig requestConfig, HttpTransformer transformer);
}

/// <summary>Conveniences over <see cref="IHttpForwarder"/>.</summary>
public static class HttpForwarderExtensions
{
    /// <summary>Forwards with default settings and the default transformer.</summary>
    public static ValueTask<ForwarderError> SendAsync(this IHttpForwarder forwarder, HttpContext context, string destinationPrefix, HttpMessageInvoker httpClient) =>
        forwarder.SendAsync(context, destinationPrefix, httpClient, ForwarderRequestConfig.Empty, HttpTransformer.Default);
}
