using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using Microsoft.AspNetCore.Connections;
using Proxy.Transport.Sockets;
using Proxy.Transport.Sockets.Epoll;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Client;

/// <summary>TLS settings for a backend connection.</summary>
public sealed class BackendTlsOptions
{
    /// <summary>SNI and the name the certificate must match (the destination's host by default).</summary>
    public string? TargetHost { get; set; }

    /// <summary>ALPN protocols offered, in preference order (e.g. h2, then http/1.1).</summary>
    public List<SslApplicationProtocol> ApplicationProtocols { get; set; } = [SslApplicationProtocol.Http2, SslApplicationProtocol.Http11];

    /// <summary>Skips certificate validation (the cluster's DangerousAcceptAnyServerCertificate). Off by default.</summary>
    public bool DangerousAcceptAnyServerCertificate { get; set; }

    /// <summary>TLS versions offered (the cluster's SslProtocols); None = the platform's default.</summary>
    public System.Security.Authentication.SslProtocols EnabledSslProtocols { get; set; }

    /// <summary>Extra validation, or null for the platform's (chain and name).</summary>
    public RemoteCertificateValidationCallback? RemoteCertificateValidation { get; set; }
}

/// <summary>An open connection to a backend: pipes to read and write, and what TLS negotiated.</summary>
// Owned by the client connection that runs over it.
public sealed class BackendTransport : IAsyncDisposable
{
    private readonly SocketConnection _socket;
    private readonly TlsDuplexPipe? _tls;
    private readonly SslStream? _sslStream;

    internal BackendTransport(SocketConnection socket, TlsDuplexPipe? tls, SslStream? sslStream)
    {
        _socket = socket;
        _tls = tls;
        _sslStream = sslStream;
        Transport = tls is not null ? tls : socket.Transport;
    }

    /// <summary>The epoll thread the connection is served by (<see cref="Sockets.EventLoop.CurrentIndex"/>), or -1 off our engine.</summary>
    public int Loop => _socket.Loop;

    /// <summary>The bytes to and from the backend (decrypted when TLS).</summary>
    public IDuplexPipe Transport { get; }

    /// <summary>The ALPN protocol the backend chose ("h2", "http/1.1"), or empty (cleartext, or no ALPN).</summary>
    public string ApplicationProtocol => _sslStream?.NegotiatedApplicationProtocol.ToString() ?? "";

    /// <summary>True when TLS wraps the connection.</summary>
    public bool IsTls => _tls is not null;

    public EndPoint? RemoteEndPoint => _socket.RemoteEndPoint;

    /// <summary>Closes the socket at once (reads and writes fail).</summary>
    public void Abort() => _socket.Abort(new ConnectionAbortedException("The backend connection was aborted."));

    public async ValueTask DisposeAsync()
    {
        if (_tls is not null)
        {
            try
            {
                await _tls.DisposeAsync().ConfigureAwait(false);
            }
            catch (Exception)
            {
                // The socket may already be gone.
            }
        }
        await _socket.DisposeAsync().ConfigureAwait(false);
    }
}

/// <summary>Opens TCP (and TLS, with SNI and ALPN) connections to backends for our client connections.</summary>
// Stateless.
public static class BackendConnector
{
    /// <summary>
    /// Connects to <paramref name="host"/>:<paramref name="port"/> (TLS when <paramref name="tls"/> is set) within
    /// <paramref name="connectTimeout"/>. Throws <see cref="SocketException"/>, <see cref="System.Security.Authentication.AuthenticationException"/>
    /// or <see cref="TimeoutException"/>; <see cref="OperationCanceledException"/> when <paramref name="cancellationToken"/> fires.
    /// </summary>
    /// <param name="loop">
    /// On our epoll engine, the thread to serve the connection (<see cref="BackendTransport.Loop"/>); negative: the calling
    /// thread when it is one of the engine's (a connection opened for a request joins the thread the request runs on),
    /// else the next in turn.
    /// </param>
    public static async ValueTask<BackendTransport> ConnectAsync(string host, int port, BackendTlsOptions? tls, TimeSpan connectTimeout,
        SocketTransportOptions? socketOptions = null, CancellationToken cancellationToken = default, int loop = -1)
    {
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        if (connectTimeout != Timeout.InfiniteTimeSpan)
        {
            timeout.CancelAfter(connectTimeout);
        }
        socketOptions ??= new SocketTransportOptions();
        Socket socket;
        EpollSocket? epoll = null;
        try
        {
            if (SocketConnectionListener.EngineFor(socketOptions) is { } engine)
            {
                (socket, epoll) = await ConnectEpollAsync(host, port, engine, loop, timeout.Token).ConfigureAwait(false);
            }
            else
            {
                socket = await ConnectRuntimeAsync(host, port, timeout.Token).ConfigureAwait(false);
            }
        }
        catch (OperationCanceledException) when (!cancellationToken.IsCancellationRequested)
        {
            throw new TimeoutException($"Connecting to {host}:{port} took longer than {connectTimeout.TotalMilliseconds:0} ms.");
        }
        var connection = new SocketConnection(socket, socketOptions, epoll: epoll);
        connection.Start();
        if (tls is null)
        {
            return new BackendTransport(connection, null, null);
        }
        var ssl = new SslStream(new DuplexPipeStream(connection.Transport), leaveInnerStreamOpen: false);
        try
        {
            var options = new SslClientAuthenticationOptions
            {
                TargetHost = tls.TargetHost ?? host,
                ApplicationProtocols = tls.ApplicationProtocols,
                EnabledSslProtocols = tls.EnabledSslProtocols,
                RemoteCertificateValidationCallback = tls.DangerousAcceptAnyServerCertificate
                    ? static (_, _, _, _) => true
                    : tls.RemoteCertificateValidation,
                // NOTE: off (the client's default is on): a TLS 1.2 renegotiation would make SslStream write the handshake
                // from the read that met it, in the TLS input pump, while the output pump writes, and the transport gives
                // each direction one user. A backend that asks for one fails that connection (502), as with TLS 1.3,
                // which has no renegotiation at all; we send no client certificate it could be asking for.
                AllowRenegotiation = false,
            };
            try
            {
                await ssl.AuthenticateAsClientAsync(options, timeout.Token).ConfigureAwait(false);
            }
            catch (OperationCanceledException) when (!cancellationToken.IsCancellationRequested)
            {
                throw new TimeoutException($"The TLS handshake with {host}:{port} took longer than {connectTimeout.TotalMilliseconds:0} ms.");
            }
        }
        catch
        {
            await ssl.DisposeAsync().ConfigureAwait(false);
            await connection.DisposeAsync().ConfigureAwait(false);
            throw;
        }
        OpenSslIdleBuffers.TryApply(ssl); // as on the server side; false (nothing done) off Linux or when the runtime's shape differs
        return new BackendTransport(connection, new TlsDuplexPipe(ssl, new TlsServerOptions()), ssl);
    }

    private static async ValueTask<Socket> ConnectRuntimeAsync(string host, int port, CancellationToken cancellationToken)
    {
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        try
        {
            await socket.ConnectAsync(host, port, cancellationToken).ConfigureAwait(false);
            return socket;
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    // As Socket.ConnectAsync(host, port): each address of the name in turn, the last failure thrown.
    private static async ValueTask<(Socket, EpollSocket)> ConnectEpollAsync(string host, int port, EpollEngine engine, int loop,
        CancellationToken cancellationToken)
    {
        // Before the first await: a name lookup or a failed address continues elsewhere.
        loop = loop >= 0 ? loop : engine.CurrentLoopOfThisEngine;
        var addresses = IPAddress.TryParse(host, out var literal)
            ? [literal]
            : await Dns.GetHostAddressesAsync(host, cancellationToken).ConfigureAwait(false);
        SocketException? last = null;
        foreach (var address in addresses)
        {
            try
            {
                return await EpollSocket.ConnectAsync(new IPEndPoint(address, port), engine, cancellationToken, loop).ConfigureAwait(false);
            }
            catch (SocketException e)
            {
                last = e;
            }
        }
        throw last ?? new SocketException((int)SocketError.HostNotFound);
    }
}
