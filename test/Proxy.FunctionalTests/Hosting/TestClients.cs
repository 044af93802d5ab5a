using System.Net;
using System.Net.Security;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>HttpClient instances that speak exactly one protocol to a test host.</summary>
public static class TestClients
{
    /// <summary>
    /// A client whose requests default to <paramref name="transport"/>'s version with
    /// <see cref="HttpVersionPolicy.RequestVersionExact"/> (no silent downgrade; h2c by prior knowledge),
    /// one HTTP/2 connection at most, and trust in our test certificate only.
    /// </summary>
    public static HttpClient Create(TestHost host, HttpTransport transport, TimeSpan? timeout = null, Action<SocketsHttpHandler>? configure = null)
    {
        var handler = new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = false,
            PooledConnectionLifetime = Timeout.InfiniteTimeSpan,
            AutomaticDecompression = DecompressionMethods.None,
            SslOptions = new SslClientAuthenticationOptions
            {
                RemoteCertificateValidationCallback = (_, certificate, _, _) => TestCertificate.IsTestCertificate(certificate),
            },
        };
        configure?.Invoke(handler);
        return new HttpClient(handler)
        {
            BaseAddress = host.AddressFor(transport),
            DefaultRequestVersion = transport.Version(),
            DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Timeout = timeout ?? TimeSpan.FromSeconds(30),
        };
    }

    /// <summary>Every (server, transport) pair, for MemberData.</summary>
    public static TheoryData<ServerKind, HttpTransport> AllTransports(params HttpTransport[] transports)
    {
        var data = new TheoryData<ServerKind, HttpTransport>();
        foreach (var kind in Enum.GetValues<ServerKind>())
        {
            foreach (var transport in transports.Length == 0 ? Enum.GetValues<HttpTransport>() : transports)
            {
                data.Add(kind, transport);
            }
        }

        return data;
    }
}
