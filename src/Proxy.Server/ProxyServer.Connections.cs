using System.Net.Sockets;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.Extensions.Logging;
using Proxy.Server.Internal;
using Proxy.Transport.Certificates;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Server;

/// <summary>Binding endpoints, accept loops and the per-connection flow.</summary>
public sealed partial class ProxyServer
{
    private List<ListenOptions> ResolveEndpoints()
    {
        var urls = _addresses.Addresses.ToArray();
        // Endpoints from code and from configuration (ProxyServer:Endpoints) replace the URLs, as on Kestrel.
        var configured = _configured is { Endpoints.Count: > 0 } ? [.. _options.ListenOptions, .. _configured.Endpoints] : _options.ListenOptions;
        if (configured.Count > 0 && !(urls.Length > 0 && _addresses.PreferHostingUrls))
        {
            if (urls.Length > 0)
            {
                ServerLog.OverridingAddresses(_logger, string.Join(", ", urls));
            }
            return configured;
        }
        if (urls.Length == 0)
        {
            return _extraListeners.Count > 0 ? [] : [EndpointResolver.Parse(EndpointResolver.DefaultAddress, _logger)];
        }
        return urls.Select(url => EndpointResolver.Parse(url, _logger)).ToList();
    }

    /// <summary>Binds one endpoint; "localhost" binds 127.0.0.1 and, when possible, ::1 on the same port.</summary>
    private List<IConnectionListener> Bind(ListenOptions endpoint)
    {
        var first = SocketConnectionListener.Bind(endpoint.EndPoint, _options.Sockets, _metrics);
        _listeners.Add(first);
        var result = new List<IConnectionListener> { first };
        if (endpoint.DisplayHost == "localhost" && Socket.OSSupportsIPv6)
        {
            var port = ((IPEndPoint)first.EndPoint).Port;
            try
            {
                var v6 = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.IPv6Loopback, port), _options.Sockets, _metrics);
                _listeners.Add(v6);
                result.Add(v6);
            }
            catch (Exception e) when (e is SocketException or AddressInUseException)
            {
                // IPv6 disabled or the port is taken on ::1 only: IPv4 loopback still serves.
                ServerLog.Ipv6LoopbackUnavailable(_logger, endpoint.ToString(), e);
            }
        }
        return result;
    }

    private static string FormatBoundAddress(ListenOptions endpoint, EndPoint bound)
    {
        var ip = (IPEndPoint)bound;
        var host = endpoint.DisplayHost ?? ListenOptions.FormatHost(ip.Address);
        return $"{endpoint.Scheme}://{host}:{ip.Port}";
    }

    private ConnectionDelegate BuildPipeline(ListenOptions endpoint, IHttpRequestHandler handler)
    {
        var http = new HttpConnectionHandler(endpoint, _options, handler, _protocolFactory, _time, _logger);
        ConnectionDelegate pipeline = http.OnConnectionAsync;
        if (endpoint.Tls is { } tls)
        {
            // The endpoint's own certificate (code or configuration), then the code default, then Certificates:Default
            // from configuration (reloaded when its files change), then the development certificate.
            if (tls.ServerCertificate is null && tls.ServerCertificateSelector is null)
            {
                tls.ServerCertificate = _options.ServerCertificate;
                if (tls.ServerCertificate is null && _configured?.DefaultCertificate is { } configuredDefault)
                {
                    tls.ServerCertificateSelector = _ => configuredDefault.Context;
                }
                else if (tls.ServerCertificate is null)
                {
                    var dev = DevelopmentCertificate.GetOrCreate(_options.DevelopmentCertificateDirectory, _time);
                    ServerLog.UsingDevelopmentCertificate(_logger, endpoint.ToString(), dev.Subject, dev.NotAfter);
                    tls.ServerCertificate = dev;
                }
            }
            tls.ApplicationProtocols = endpoint.AlpnProtocols();
            tls.ReleaseIdleBuffers &= _options.Memory.ReleaseIdleTlsBuffers;
            pipeline = new TlsConnectionMiddleware(pipeline, tls, _loggerFactory.CreateLogger<TlsConnectionMiddleware>(), _time, _metrics).OnConnectionAsync;
        }
        return pipeline;
    }

    private static readonly TimeSpan MinAcceptBackoff = TimeSpan.FromMilliseconds(10);
    private static readonly TimeSpan MaxAcceptBackoff = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan OutOfConnectionsLogInterval = TimeSpan.FromSeconds(10);

    /// <summary>The bound on open connections (<see cref="ProxyServerOptions.MaxConcurrentConnections"/>), or null for none.</summary>
    private ConnectionLimit? CreateConnectionLimit()
    {
        switch (_options.MaxConcurrentConnections)
        {
            case < 0:
                throw new InvalidOperationException($"ProxyServer:MaxConcurrentConnections is {_options.MaxConcurrentConnections}: use a positive number, or 0 for no bound.");
            case 0:
                return null;
            case { } max:
                return new ConnectionLimit(max);
        }

        if (ConnectionLimit.FromFileLimit(out var fileLimit) is not { } derived)
        {
            return null;
        }

        ServerLog.ConnectionLimitFromFileLimit(_logger, derived, fileLimit);
        return new ConnectionLimit(derived);
    }

    /// <summary>At most one of these warnings every 10 s: a flood would otherwise write one per accept.</summary>
    private void LogOutOfConnections(Action log)
    {
        var now = _time.GetTimestamp();
        var last = Interlocked.Read(ref _lastOutOfConnectionsLog);
        if ((last == long.MinValue || _time.GetElapsedTime(last, now) >= OutOfConnectionsLogInterval)
            && Interlocked.CompareExchange(ref _lastOutOfConnectionsLog, now, last) == last)
        {
            log();
        }
    }

    private void StartAcceptLoop(IConnectionListener listener, ConnectionDelegate pipeline)
        => _acceptLoops.Add(AcceptLoopAsync(listener, pipeline));

    private async Task AcceptLoopAsync(IConnectionListener listener, ConnectionDelegate pipeline)
    {
        var endpointTags = _metrics is null ? null : ServerMetrics.EndpointTags(listener.EndPoint);
        var backoff = MinAcceptBackoff;
        while (true)
        {
            ConnectionContext? connection;
            try
            {
                if (_connectionLimit is { } limit && limit.Open >= limit.Max)
                {
                    LogOutOfConnections(() => ServerLog.ConnectionLimitReached(_logger, limit.Max));
                    var pausedAt = _time.GetTimestamp();
                    await limit.WaitForRoomAsync(_stopping.Token).ConfigureAwait(false);
                    _metrics?.AcceptPaused(_time.GetElapsedTime(pausedAt), atConnectionLimit: true);
                }
                connection = await listener.AcceptAsync().ConfigureAwait(false);
            }
            catch (Exception) when (_stopping.IsCancellationRequested)
            {
                return;
            }
            catch (System.Net.Sockets.SocketException e) when (SocketConnectionListener.IsOutOfResources(e))
            {
                // Out of descriptors (or buffers): the connection stays in the listen backlog; wait, then try again.
                LogOutOfConnections(() => ServerLog.AcceptOutOfResources(_logger, e.Message, _connectionLimit?.Max));
                try
                {
                    await Task.Delay(backoff, _time, _stopping.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                    return;
                }
                _metrics?.AcceptPaused(backoff, atConnectionLimit: false);
                backoff = TimeSpan.FromTicks(Math.Min(backoff.Ticks * 2, MaxAcceptBackoff.Ticks));
                continue;
            }
            if (connection is null)
            {
                return; // Unbound.
            }
            backoff = MinAcceptBackoff;
            _connectionLimit?.Enter();
            var tracked = new ServerConnection(connection, _metrics, endpointTags);
            tracked.CountedActive = _metrics?.ConnectionStarted(tracked.EndpointTags) ?? false;
            connection.Features.Set(tracked);
            // Registered before the flow starts, so StopAsync never misses an accepted connection.
            _connections.TryAdd(tracked, 0);
            ServerLog.ConnectionAccepted(_logger, connection.ConnectionId, connection.RemoteEndPoint);
            _ = RunConnectionAsync(tracked, pipeline);
        }
    }

    private async Task RunConnectionAsync(ServerConnection tracked, ConnectionDelegate pipeline)
    {
        // Leave the accept loop before doing any connection work.
        await Task.Yield();
        var connection = tracked.Context;
        try
        {
            await pipeline(connection).ConfigureAwait(false);
        }
        catch (Exception e) when (e is ConnectionResetException or ConnectionAbortedException or IOException or OperationCanceledException)
        {
            // The peer went away or we aborted: routine.
            tracked.SetEndReason(e is ConnectionResetException ? "connection_reset" : e.GetType().FullName!);
        }
        catch (Exception e)
        {
            tracked.SetEndReason(e.GetType().FullName!);
            ServerLog.ConnectionFailed(_logger, connection.ConnectionId, e);
        }
        finally
        {
            _connections.TryRemove(tracked, out _);
            _connectionLimit?.Exit();
            try
            {
                await connection.DisposeAsync().ConfigureAwait(false);
            }
            catch (Exception e)
            {
                ServerLog.ConnectionFailed(_logger, connection.ConnectionId, e);
            }
            _metrics?.ConnectionEnded(tracked.EndpointTags, tracked.CountedActive, tracked.StartTimestamp, tracked.ProtocolVersion,
                connection.Features.Get<Microsoft.AspNetCore.Connections.Features.ITlsHandshakeFeature>()?.Protocol, tracked.EndReason);
            tracked.MarkCompleted();
            tracked.Dispose();
        }
    }

    private async Task StopListenersAsync()
    {
        foreach (var listener in _listeners)
        {
            await listener.UnbindAsync().ConfigureAwait(false);
        }
        await Task.WhenAll(_acceptLoops).ConfigureAwait(false);
        foreach (var listener in _listeners)
        {
            await listener.DisposeAsync().ConfigureAwait(false);
        }
        _listeners.Clear();
    }

    /// <summary>The addresses the host asked for, then the addresses actually bound.</summary>
    private sealed class ServerAddressesFeature : IServerAddressesFeature
    {
        public ICollection<string> Addresses { get; } = new List<string>();

        public bool PreferHostingUrls { get; set; }
    }
}
