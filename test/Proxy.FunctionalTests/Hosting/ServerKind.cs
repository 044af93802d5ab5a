namespace Proxy.FunctionalTests.Hosting;

/// <summary>The server an app under test runs on: every functional test is a theory over this.</summary>
public enum ServerKind
{
    /// <summary>ASP.NET Core's Kestrel: the baseline that proves the tests themselves are right.</summary>
    Kestrel,

    /// <summary>Our engine, <c>builder.WebHost.UseProxyServer()</c>.</summary>
    ProxyServer,
}

/// <summary>How a client reaches the host: protocol and whether TLS (with ALPN) is used.</summary>
public enum HttpTransport
{
    /// <summary>HTTP/2 over TLS, negotiated with ALPN "h2".</summary>
    Http2Tls,

    /// <summary>HTTP/2 over cleartext TCP with prior knowledge (h2c, no Upgrade).</summary>
    Http2Cleartext,

    /// <summary>HTTP/1.1 over cleartext TCP.</summary>
    Http11Cleartext,

    /// <summary>HTTP/1.1 over TLS, negotiated with ALPN "http/1.1".</summary>
    Http11Tls,
}

public static class TransportExtensions
{
    public static bool IsTls(this HttpTransport transport) => transport is HttpTransport.Http2Tls or HttpTransport.Http11Tls;

    public static bool IsHttp2(this HttpTransport transport) => transport is HttpTransport.Http2Tls or HttpTransport.Http2Cleartext;

    public static Version Version(this HttpTransport transport) =>
        transport.IsHttp2() ? System.Net.HttpVersion.Version20 : System.Net.HttpVersion.Version11;

    /// <summary>The value ASP.NET Core puts in HttpRequest.Protocol for this transport.</summary>
    public static string RequestProtocol(this HttpTransport transport) => transport.IsHttp2() ? "HTTP/2" : "HTTP/1.1";
}
