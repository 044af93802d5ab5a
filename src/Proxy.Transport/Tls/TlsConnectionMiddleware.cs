using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features; // ITlsApplicationProtocolFeature lives here (an interface only).
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Proxy.Transport.Tls;

/// <summary>
/// Connection middleware: runs the TLS handshake (SslStream, ALPN), publishes what was
/// negotiated as connection features, then swaps <see cref="ConnectionContext.Transport"/> for
/// pipes over the SslStream and calls the next layer. Immutable and shared by all connections.
/// </summary>
public sealed partial class TlsConnectionMiddleware
{
    private readonly ConnectionDelegate _next;
    private readonly TlsServerOptions _options;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly SslStreamCertificateContext? _certificateContext;
    private readonly ITlsHandshakeMetrics? _metrics;

    /// <param name="metrics">Where handshakes are counted and timed, or null.</param>
    public TlsConnectionMiddleware(ConnectionDelegate next, TlsServerOptions options, ILogger? logger = null, TimeProvider? time = null,
        ITlsHandshakeMetrics? metrics = null)
    {
        ArgumentNullException.ThrowIfNull(next);
        ArgumentNullException.ThrowIfNull(options);
        var certificate = options.ServerCertificate;
        if (certificate is null && options.ServerCertificateSelector is null)
        {
            throw new ArgumentException("TlsServerOptions.ServerCertificate or ServerCertificateSelector is required.", nameof(options));
        }
        if (certificate is { HasPrivateKey: false })
        {
            throw new ArgumentException($"The certificate '{certificate.Subject}' has no private key.", nameof(options));
        }
        if (options.MaxCoalescedWriteSize < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(options), "MaxCoalescedWriteSize must be positive.");
        }
        if (options.MaxInputBufferSize < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(options), "MaxInputBufferSize must be positive.");
        }
        _next = next;
        _options = options;
        _logger = logger ?? NullLogger.Instance;
        _time = time ?? TimeProvider.System;
        _metrics = metrics;
        // Built once: chain building per handshake is expensive. A selector brings contexts it built the same way.
        _certificateContext = options.ServerCertificateSelector is null
            ? SslStreamCertificateContext.Create(certificate!, additionalCertificates: null, offline: true)
            : null;
    }

    /// <summary>Middleware form for <see cref="IConnectionBuilder"/>.Use.</summary>
    public static Func<ConnectionDelegate, ConnectionDelegate> Create(TlsServerOptions options, ILogger? logger = null, TimeProvider? time = null)
        => next => new TlsConnectionMiddleware(next, options, logger, time).OnConnectionAsync;

    public async Task OnConnectionAsync(ConnectionContext context)
    {
        var innerTransport = context.Transport;
        var sslStream = new SslStream(new DuplexPipeStream(innerTransport), leaveInnerStreamOpen: false);

        if (!await HandshakeAsync(context, sslStream).ConfigureAwait(false))
        {
            await sslStream.DisposeAsync().ConfigureAwait(false);
            return;
        }

        var feature = new TlsConnectionFeature(sslStream);
        context.Features.Set<ITlsConnectionFeature>(feature);
        context.Features.Set<ITlsHandshakeFeature>(feature);
        context.Features.Set<ITlsApplicationProtocolFeature>(feature);
        Log.HandshakeCompleted(_logger, context.ConnectionId, feature.Protocol, sslStream.NegotiatedApplicationProtocol.ToString());

        var tlsTransport = new TlsDuplexPipe(sslStream, _options);
        context.Transport = tlsTransport;
        try
        {
            await _next(context).ConfigureAwait(false);
        }
        finally
        {
            await tlsTransport.DisposeAsync().ConfigureAwait(false);
            context.Transport = innerTransport;
        }
    }

    private async Task<bool> HandshakeAsync(ConnectionContext context, SslStream sslStream)
    {
        using var timeout = new CancellationTokenSource(_options.HandshakeTimeout, _time);
        using var linked = CancellationTokenSource.CreateLinkedTokenSource(timeout.Token, context.ConnectionClosed);
        var mode = _options.ClientCertificateMode;
        var authOptions = new SslServerAuthenticationOptions
        {
            ServerCertificateContext = _certificateContext,
            ApplicationProtocols = _options.ApplicationProtocols,
            EnabledSslProtocols = _options.EnabledSslProtocols,
            ClientCertificateRequired = mode != ClientCertificateMode.NoCertificate,
            CertificateRevocationCheckMode = X509RevocationMode.NoCheck,
            RemoteCertificateValidationCallback = (_, certificate, chain, errors) =>
            {
                if (certificate is null)
                {
                    return mode != ClientCertificateMode.RequireCertificate;
                }
                if (mode == ClientCertificateMode.NoCertificate)
                {
                    return true;
                }
                var cert2 = certificate as X509Certificate2 ?? new X509Certificate2(certificate);
                return _options.ClientCertificateValidation?.Invoke(cert2, chain, errors) ?? errors == SslPolicyErrors.None;
            },
        };

        var start = _time.GetTimestamp();
        var counted = _metrics?.HandshakeStarted(context) ?? false;
        try
        {
            if (_options.ServerCertificateSelector is { } select)
            {
                // The certificate is chosen once the ClientHello (and its SNI name) is in: per name, and the current one
                // of a certificate that reloads when its files change.
                await sslStream.AuthenticateAsServerAsync((_, hello, _, _) =>
                {
                    authOptions.ServerCertificateContext = select(hello.ServerName is { Length: > 0 } name ? name : null)
                        ?? throw new AuthenticationException($"No certificate for the server name '{hello.ServerName}'.");
                    return ValueTask.FromResult(authOptions);
                }, null, linked.Token).ConfigureAwait(false);
            }
            else
            {
                await sslStream.AuthenticateAsServerAsync(authOptions, linked.Token).ConfigureAwait(false);
            }

            _metrics?.HandshakeEnded(context, counted, _time.GetElapsedTime(start), sslStream.SslProtocol, error: null, timedOut: false);
            if (_options.ReleaseIdleBuffers && OperatingSystem.IsLinux() && !OpenSslIdleBuffers.TryApply(sslStream)
                && Interlocked.Exchange(ref s_releaseUnavailableLogged, 1) == 0)
            {
                Log.ReleaseBuffersUnavailable(_logger);
            }
            return true;
        }
        catch (OperationCanceledException e) when (timeout.IsCancellationRequested)
        {
            _metrics?.HandshakeEnded(context, counted, _time.GetElapsedTime(start), protocol: null, e, timedOut: true);
            Log.HandshakeTimedOut(_logger, context.ConnectionId, _options.HandshakeTimeout);
        }
        catch (OperationCanceledException e)
        {
            _metrics?.HandshakeEnded(context, counted, _time.GetElapsedTime(start), protocol: null, e, timedOut: false);
            Log.HandshakeFailed(_logger, context.ConnectionId, "connection closed");
        }
        catch (Exception e) when (e is AuthenticationException or IOException or ConnectionResetException or ConnectionAbortedException)
        {
            _metrics?.HandshakeEnded(context, counted, _time.GetElapsedTime(start), protocol: null, e, timedOut: false);
            Log.HandshakeFailed(_logger, context.ConnectionId, e.Message);
        }
        return false;
    }

    private static int s_releaseUnavailableLogged;

    private static partial class Log
    {
        [LoggerMessage(4, LogLevel.Information, "TLS: OpenSSL's idle record buffers cannot be released on this runtime (SSL_MODE_RELEASE_BUFFERS not reachable); each TLS connection keeps about 34 KB of them.")]
        public static partial void ReleaseBuffersUnavailable(ILogger logger);

        [LoggerMessage(1, LogLevel.Debug, "Connection {ConnectionId}: TLS handshake completed ({Protocol}, ALPN '{Alpn}').")]
        public static partial void HandshakeCompleted(ILogger logger, string connectionId, SslProtocols protocol, string alpn);

        [LoggerMessage(2, LogLevel.Debug, "Connection {ConnectionId}: TLS handshake timed out after {Timeout}.")]
        public static partial void HandshakeTimedOut(ILogger logger, string connectionId, TimeSpan timeout);

        [LoggerMessage(3, LogLevel.Debug, "Connection {ConnectionId}: TLS handshake failed: {Reason}")]
        public static partial void HandshakeFailed(ILogger logger, string connectionId, string reason);
    }
}
