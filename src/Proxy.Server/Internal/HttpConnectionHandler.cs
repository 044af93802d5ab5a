using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features; // ITlsApplicationProtocolFeature (an interface only).
using Microsoft.Extensions.Logging;
using Proxy.Transport.Sockets;

namespace Proxy.Server.Internal;

/// <summary>
/// The last connection middleware of an endpoint: builds the connection's metadata, chooses
/// the protocol (ALPN over TLS; preface sniffing in cleartext) and runs the engine.
/// Immutable and shared by the endpoint's connections.
/// </summary>
internal sealed class HttpConnectionHandler(
    ListenOptions endpoint,
    ProxyServerOptions options,
    IHttpRequestHandler requestHandler,
    IConnectionProtocolFactory factory,
    TimeProvider time,
    ILogger logger)
{
    public async Task OnConnectionAsync(ConnectionContext context)
    {
        var tracked = context.Features.Get<ServerConnection>()
            ?? throw new InvalidOperationException("The connection is not tracked by the server.");
        var metadata = CreateMetadata(context, tracked.Metrics is null ? null : tracked, EventLoopScheduling.For(options.Sockets));
        var useHttp2 = await ChooseHttp2Async(context, metadata, tracked.Aborted).ConfigureAwait(false);
        if (useHttp2 is null)
        {
            return;
        }

        IConnectionProtocol protocol = useHttp2.Value
            ? factory.CreateHttp2(context.Transport, options.Http2, requestHandler, metadata, time)
            : factory.CreateHttp1(context.Transport, options.Http1, requestHandler, metadata, time);
        ServerLog.ProtocolSelected(logger, context.ConnectionId, useHttp2.Value ? "HTTP/2" : "HTTP/1.1");
        tracked.ProtocolVersion = useHttp2.Value ? "2" : "1.1";
        tracked.Metrics?.ProtocolChosen(useHttp2.Value, metadata.IsTls);
        tracked.SetProtocol(protocol);
        await protocol.ProcessAsync(tracked.Aborted).ConfigureAwait(false);
    }

    /// <summary>True: HTTP/2, false: HTTP/1.1, null: the connection ended before we could tell.</summary>
    private async ValueTask<bool?> ChooseHttp2Async(ConnectionContext context, ConnectionMetadata metadata, CancellationToken aborted)
    {
        var protocols = endpoint.Protocols;
        if (protocols == HttpProtocols.Http2)
        {
            return true; // HTTP/2 only (prior knowledge, or ALPN offered nothing else).
        }
        if (protocols == HttpProtocols.Http1)
        {
            return false;
        }
        if (metadata.IsTls)
        {
            // RFC 9113 §3.2: over TLS, HTTP/2 is chosen by ALPN "h2" only.
            return metadata.ApplicationProtocol == "h2";
        }

        // RFC 9113 §3.3: cleartext prior knowledge starts with the connection preface.
        using var timeout = new CancellationTokenSource(options.ProtocolDetectionTimeout, time);
        using var linked = CancellationTokenSource.CreateLinkedTokenSource(timeout.Token, aborted);
        try
        {
            return await PrefaceDetector.IsHttp2Async(context.Transport.Input, linked.Token).ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
            return null; // Silent client or server shutdown: drop it.
        }
    }

    private static ConnectionMetadata CreateMetadata(ConnectionContext context, IProtocolMetrics? metrics, WorkScheduler scheduler)
    {
        var handshake = context.Features.Get<ITlsHandshakeFeature>();
        if (handshake is null)
        {
            return new ConnectionMetadata
            {
                ConnectionId = context.ConnectionId,
                LocalEndPoint = context.LocalEndPoint,
                RemoteEndPoint = context.RemoteEndPoint,
                Metrics = metrics,
                Scheduler = scheduler,
                EventLoop = context.Features.Get<IEventLoopFeature>()?.Loop ?? -1,
            };
        }
        var alpn = context.Features.Get<ITlsApplicationProtocolFeature>()?.ApplicationProtocol ?? default;
        return new ConnectionMetadata
        {
            ConnectionId = context.ConnectionId,
            LocalEndPoint = context.LocalEndPoint,
            RemoteEndPoint = context.RemoteEndPoint,
            IsTls = true,
            TlsProtocol = handshake.Protocol,
            NegotiatedCipherSuite = handshake.NegotiatedCipherSuite,
            ApplicationProtocol = System.Text.Encoding.ASCII.GetString(alpn.Span),
            ClientCertificate = context.Features.Get<ITlsConnectionFeature>()?.ClientCertificate,
            HostName = string.IsNullOrEmpty(handshake.HostName) ? null : handshake.HostName,
            Metrics = metrics,
            Scheduler = scheduler,
            EventLoop = context.Features.Get<IEventLoopFeature>()?.Loop ?? -1,
        };
    }
}
