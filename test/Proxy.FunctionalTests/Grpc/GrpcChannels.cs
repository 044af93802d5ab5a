using System.Net;
using System.Net.Security;
using Grpc.Net.Client;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>Grpc.Net.Client channels to a test host, the way an application creates them.</summary>
public static class GrpcChannels
{
    /// <summary>
    /// A channel to <paramref name="host"/> over <paramref name="transport"/> (h2c by prior knowledge for http://, ALPN h2
    /// for https://) on its own SocketsHttpHandler that trusts our test certificate only. Disposing the channel disposes
    /// the handler. An <paramref name="observer"/> sees every request and response on their way (see <see cref="WireRecorder"/>).
    /// </summary>
    public static GrpcChannel Create(TestHost host, HttpTransport transport, Action<SocketsHttpHandler>? configure = null,
        Action<GrpcChannelOptions>? configureChannel = null, DelegatingHandler? observer = null)
    {
        if (!transport.IsHttp2())
        {
            throw new ArgumentException($"gRPC needs HTTP/2, not {transport}.", nameof(transport));
        }

        var handler = new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = true, // Grpc.Net.Client's own default
            AutomaticDecompression = DecompressionMethods.None,
            SslOptions = new SslClientAuthenticationOptions
            {
                RemoteCertificateValidationCallback = (_, certificate, _, _) => TestCertificate.IsTestCertificate(certificate),
            },
        };
        configure?.Invoke(handler);
        HttpMessageHandler outermost = handler;
        if (observer is not null)
        {
            observer.InnerHandler = handler;
            outermost = observer;
        }

        var options = new GrpcChannelOptions { HttpHandler = outermost, DisposeHttpClient = true };
        configureChannel?.Invoke(options);
        return GrpcChannel.ForAddress(host.AddressFor(transport), options);
    }
}
