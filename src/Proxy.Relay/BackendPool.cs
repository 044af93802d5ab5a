using System.Net.Security;
using Microsoft.Extensions.Logging;
using System.Collections.Concurrent;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http1.Client;
using Proxy.Protocols.Http2.Client;
using Proxy.Transport.Client;
using Proxy.Transport.Sockets;
using Proxy.Forwarding.Forwarder;
using Proxy.Server.Internal;

namespace Proxy.Relay;

/// <summary>How a pool reaches its destination: the cluster's HttpClient and HttpRequest settings, resolved once.</summary>
internal sealed record BackendPoolSettings
{
    /// <summary>HTTP/2 with prior knowledge on cleartext (h2c), or HTTP/2 offered first by ALPN on TLS.</summary>
    public bool PreferHttp2 { get; init; }
    /// <summary>Only HTTP/2 (HttpRequest Version 2 with RequestVersionExact): ALPN offers h2 alone.</summary>
    public bool Http2Only { get; init; }
    public int MaxConnections { get; init; } = int.MaxValue;
    public bool EnableMultipleHttp2Connections { get; init; } = true;
    public TimeSpan ConnectTimeout { get; init; } = TimeSpan.FromSeconds(10);
    public TimeSpan IdleTimeout { get; init; } = TimeSpan.FromSeconds(60);
    public TimeSpan Lifetime { get; init; } = Timeout.InfiniteTimeSpan;
    public bool DangerousAcceptAnyServerCertificate { get; init; }
    public System.Security.Authentication.SslProtocols SslProtocols { get; init; }
    public Http2ClientOptions Http2 { get; init; } = new();
    public Http1ClientOptions Http1 { get; init; } = new();
    /// <summary>The backend sockets: reads continue on the receive loop and sends run on the flushing thread (InlineScheduling, set here whatever its default).</summary>
    public Proxy.Transport.Sockets.SocketTransportOptions Sockets { get; init; } = new() { InlineScheduling = true };
}

/// <summary>Where a pool reports the connections it opens and closes, with its cluster and destination.</summary>
// Immutable, shared by the pool's connect and close paths.
internal sealed record BackendPoolMetrics(IBackendConnectionMetrics Metrics, string ClusterId, string DestinationId)
{
    public void Opened(string version) => Metrics.ConnectionOpened(ClusterId, DestinationId, version);

    public void Closed(string version) => Metrics.ConnectionClosed(ClusterId, DestinationId, version);
}

/// <summary>
/// The connections of one destination. HTTP/1.1 connections carry one exchange at a time and wait in an idle stack
/// between exchanges (the most recently used first, so the rest can time out). HTTP/2 connections are shared by many streams: a request takes the first
/// connection with a free stream slot, and a new connection opens when every one is at the backend's
/// SETTINGS_MAX_CONCURRENT_STREAMS (EnableMultipleHttp2Connections, as SocketsHttpHandler and YARP PR #748), up to
/// MaxConnectionsPerServer; beyond that requests wait for a slot (the admission gate in front bounds how many). Idle
/// connections close after the idle timeout, and connections older than their lifetime stop taking streams.
/// On our epoll engine both kinds keep to the epoll threads, as nghttpx's and Envoy's workers keep their own upstream
/// connections: an idle HTTP/1.1 connection of the request's own thread goes first, and with EnableMultipleHttp2Connections
/// an HTTP/2 request takes a connection of its thread, or rides another thread's while one for its thread opens beside it
/// (StartConnectForLoop): a destination then has up to one HTTP/2 connection per epoll thread even when one could carry it all.
/// </summary>
// Shared by all requests to one destination: the connection array is copy-on-write under _lock; the rest are atomics.
internal sealed class BackendPool : IAsyncDisposable
{
    private readonly string _host;
    private readonly string _tlsHost;
    private readonly int _port;
    private readonly bool _tls;
    private readonly BackendPoolSettings _settings;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly Lock _lock = new();
    private volatile PooledHttp2[] _http2 = [];
    private Task? _connecting;
    // Completed and cleared by the next change of the pool's state; made only by a request that is about to wait for one
    // (ChangedTask), so a released connection with nobody waiting allocates nothing (a source and its task were 80 bytes
    // of every forwarded HTTP/1.1 request).
    private TaskCompletionSource? _changed;
    private ITimer? _sweep;
    private bool _disposed;
    // Per epoll thread (see LoopStacks): a request takes a connection its own thread serves when one is idle.
    private readonly LoopStacks<PooledHttp1> _idleHttp1 = new(Environment.ProcessorCount);
    private int _http1Count;       // open HTTP/1.1 connections, idle or busy
    private volatile bool _http1;  // the destination speaks HTTP/1.1 (configured, or ALPN chose it)
    private readonly BackendPoolMetrics? _metrics;

    /// <param name="tlsHost">
    /// SNI and the name the certificate must match, when not the address's host: the host of the destination's configured
    /// Host, as SocketsHttpHandler takes it from the Host header.
    /// </param>
    public BackendPool(string destinationPrefix, BackendPoolSettings settings, ILogger logger, TimeProvider time, BackendPoolMetrics? metrics = null,
        string? tlsHost = null)
    {
        _metrics = metrics;
        var uri = new Uri(destinationPrefix, UriKind.Absolute);
        _tls = uri.Scheme == Uri.UriSchemeHttps;
        _host = uri.IdnHost;
        _tlsHost = tlsHost ?? _host;
        _port = uri.Port;
        Scheme = uri.Scheme;
        _settings = settings;
        _logger = logger;
        _time = time;
        _http1 = !settings.PreferHttp2;
    }

    /// <summary>"http" or "https": the :scheme of requests to this destination.</summary>
    public string Scheme { get; }

    /// <summary>Open HTTP/2 connections (for tests and metrics).</summary>
    public int ConnectionCount => _http2.Length + Volatile.Read(ref _http1Count);

    /// <summary>Tests: each HTTP/2 connection's epoll thread (-1 off our engine) and streams in use.</summary>
    internal (int Loop, int ActiveStreams)[] Http2Connections => Array.ConvertAll(_http2, p => (p.Transport.Loop, p.Connection.ActiveStreams));

    /// <summary>Tests: the connect under way, if any.</summary>
    internal Task? PendingConnect
    {
        get
        {
            lock (_lock)
            {
                return _connecting;
            }
        }
    }

    private sealed class PooledHttp1(Http1ClientConnection connection, BackendTransport transport)
    {
        public Http1ClientConnection Connection { get; } = connection;
        public BackendTransport Transport { get; } = transport;
        public long IdleSince;
    }

    private sealed class PooledHttp2(Http2ClientConnection connection, BackendTransport transport, long created)
    {
        public Http2ClientConnection Connection { get; } = connection;
        public BackendTransport Transport { get; } = transport;
        public long Created { get; } = created;
        /// <summary>When the connection last had no stream (for the idle timeout); 0 while busy.</summary>
        public long IdleSince;
    }

    /// <summary>
    /// Opens an exchange on a pooled connection (connecting when none has a free slot). Throws
    /// <see cref="BackendException"/> (Connect) when no connection can be made, <see cref="OperationCanceledException"/>
    /// when <paramref name="cancellationToken"/> fires first.
    /// </summary>
    // NOTE: a dispatcher, not an async method: one state machine fewer per request, and nothing here can throw.
    public ValueTask<(BackendExchange Exchange, bool ReusedHttp1)> OpenAsync(BackendRequest request, CancellationToken cancellationToken) =>
        _http1 ? OpenHttp1Async(request, cancellationToken) : OpenHttp2Async(request, cancellationToken);

    // ---- HTTP/2 ----

    private async ValueTask<(BackendExchange, bool)> OpenHttp2Async(BackendRequest request, CancellationToken cancellationToken)
    {
        var connectAttempts = 0;
        var freeSlotRetries = 0;
        // On an epoll thread, with more than one connection allowed: this thread's own connections first (see StartConnectForLoop).
        var requestLoop = LoopOf(request);
        var loop = _settings.EnableMultipleHttp2Connections ? requestLoop : -1;
        while (true)
        {
            foreach (var pooled in _http2)
            {
                if ((loop < 0 || pooled.Transport.Loop == loop) && pooled.Connection.HasCapacity && pooled.Connection.TryOpen(request) is { } exchange)
                {
                    return (exchange, false);
                }
            }
            if (loop >= 0)
            {
                foreach (var pooled in _http2)
                {
                    if (pooled.Connection.HasCapacity && pooled.Connection.TryOpen(request) is { } exchange)
                    {
                        // Another thread's connection carries this one; a connection of this thread opens beside it.
                        StartConnectForLoop(loop);
                        return (exchange, false);
                    }
                }
            }
            Task? connecting;
            Task changed;
            var startedHere = false;
            lock (_lock)
            {
                ObjectDisposedException.ThrowIf(_disposed, this);
                changed = ChangedTask();
                if (_connecting is null && CanAddConnection())
                {
                    startedHere = true;
                    // NOTE: started on the pool, not inline: a connect that completed synchronously would clear
                    // _connecting (in its finally, re-entering this lock) before this assignment, leaving a finished
                    // task here for good and no connection ever opened again.
                    // The requester's thread, even for the one connection of a destination without multiple ones. A copy in
                    // this scope: a lambda over the method's own local would allocate its closure on every call.
                    var forLoop = requestLoop;
                    _connecting = Task.Run(() => ConnectHttp2Async(forLoop));
                }
                connecting = _connecting;
            }
            if (connecting is null && HasFreeSlot())
            {
                // A connection with room appeared meanwhile: take it (yielding now and then, never a hot spin).
                if (++freeSlotRetries % 8 == 0)
                {
                    await Task.Yield();
                }
                continue;
            }
            if (connecting is not null)
            {
                // NOTE: only connects this request started count: under a cold burst most requests wait on connects
                // other requests started, and that is no reason to fail them.
                if (startedHere && ++connectAttempts > 3)
                {
                    throw new BackendException(BackendFailure.Connect, $"Connections to {_host}:{_port} opened but took no stream.");
                }
                await connecting.WaitAsync(cancellationToken).ConfigureAwait(false);
                if (_http1)
                {
                    return await OpenHttp1Async(request, cancellationToken).ConfigureAwait(false); // ALPN chose HTTP/1.1
                }
                continue;
            }
            // Every connection is full and no more may open: wait for a stream slot (or a closed connection).
            await changed.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
    }

    /// <summary>
    /// Under the lock: whether a new connection should open. Not while an open one still has a free stream slot (a
    /// connect that finished between the caller's scan and the lock added one), nor beyond the configured limits.
    /// </summary>
    private bool HasFreeSlot()
    {
        foreach (var pooled in _http2)
        {
            if (pooled.Connection.HasCapacity)
            {
                return true;
            }
        }
        return false;
    }

    private bool CanAddConnection()
    {
        var open = 0;
        foreach (var pooled in _http2)
        {
            if (pooled.Connection.IsOpen)
            {
                if (pooled.Connection.HasCapacity)
                {
                    return false; // scan again: this one can take the request
                }
                open++;
            }
        }
        return open == 0 || (_settings.EnableMultipleHttp2Connections && open < _settings.MaxConnections);
    }

    /// <summary>
    /// HTTP/2 affinity: a request on epoll thread <paramref name="loop"/> found only other threads' connections with room,
    /// so one for this thread opens in the background (one connect at a time, within MaxConnectionsPerServer; after a
    /// failed one, not again for <see cref="AffinityRetryDelay"/>). Its streams are then read on the thread their front
    /// connections run on, instead of one connection's read loop serving every thread's requests.
    /// </summary>
    private void StartConnectForLoop(int loop)
    {
        // NOTE: checked without the lock first: under load a thread whose connection is full sends every request here,
        // and the usual answer (it has one, or a connect is under way) needs no lock.
        var retryAfter = Volatile.Read(ref _affinityRetryAfter);
        if (Volatile.Read(ref _connecting) is not null || (retryAfter != 0 && _time.GetTimestamp() < retryAfter))
        {
            return;
        }
        foreach (var pooled in _http2)
        {
            if (pooled.Transport.Loop == loop && pooled.Connection.IsOpen)
            {
                return;
            }
        }
        lock (_lock)
        {
            if (_disposed || _connecting is not null || _http1)
            {
                return;
            }
            var open = 0;
            foreach (var pooled in _http2)
            {
                if (pooled.Connection.IsOpen)
                {
                    if (pooled.Transport.Loop == loop)
                    {
                        return; // this thread has one already (full for now)
                    }
                    open++;
                }
            }
            if (open >= _settings.MaxConnections)
            {
                return;
            }
            _connecting = Task.Run(async () =>
            {
                try
                {
                    await ConnectHttp2Async(loop).ConfigureAwait(false);
                }
                catch (Exception ex)
                {
                    // Nobody waits on it: requests carry on on the connections there are.
                    Volatile.Write(ref _affinityRetryAfter, _time.GetTimestamp() + (long)(AffinityRetryDelay.TotalSeconds * _time.TimestampFrequency));
                    Log.ConnectionFailed(_logger, _host, _port, ex.Message);
                }
            });
        }
    }

    private static readonly TimeSpan AffinityRetryDelay = TimeSpan.FromSeconds(5);

    // TimeProvider timestamp before which no background connect for affinity starts (set when one failed).
    private long _affinityRetryAfter;

    /// <param name="loop">The epoll thread the connection should join (-1: the next in turn).</param>
    private async Task ConnectHttp2Async(int loop)
    {
        try
        {
            BackendTransport transport;
            try
            {
                var tls = !_tls ? null : new BackendTlsOptions
                {
                    TargetHost = _tlsHost,
                    ApplicationProtocols = _settings.Http2Only ? [SslApplicationProtocol.Http2] : [SslApplicationProtocol.Http2, SslApplicationProtocol.Http11],
                    DangerousAcceptAnyServerCertificate = _settings.DangerousAcceptAnyServerCertificate,
                EnabledSslProtocols = _settings.SslProtocols,
                };
                transport = await BackendConnector.ConnectAsync(_host, _port, tls, _settings.ConnectTimeout, _settings.Sockets, loop: loop).ConfigureAwait(false);
            }
            catch (Exception ex)
            {
                throw new BackendException(BackendFailure.Connect, $"Connecting to {_host}:{_port} failed: {ex.Message}", inner: ex);
            }
            if (transport.IsTls && transport.ApplicationProtocol != "h2")
            {
                if (_settings.Http2Only)
                {
                    await transport.DisposeAsync().ConfigureAwait(false);
                    throw new BackendException(BackendFailure.Connect,
                        $"{_host}:{_port} did not negotiate h2 by ALPN ('{transport.ApplicationProtocol}') and the cluster asks for HTTP/2 exactly.");
                }
                // The backend chose HTTP/1.1: the destination is HTTP/1.1 from now on, and this connection its first.
                _http1 = true;
                AddHttp1(transport);
                return;
            }
            var connection = new Http2ClientConnection(transport.Transport, _settings.Http2, _time, EventLoopScheduling.For(_settings.Sockets));
            var pooled = new PooledHttp2(connection, transport, _time.GetTimestamp());
            connection.StateChanged = _ => OnStateChanged();
            lock (_lock)
            {
                _http2 = [.. _http2, pooled];
                _sweep ??= _time.CreateTimer(static s => ((BackendPool)s!).Sweep(), this, SweepPeriod, SweepPeriod);
            }
            _metrics?.Opened("2");
            _ = RunAsync(pooled);
        }
        finally
        {
            lock (_lock)
            {
                _connecting = null;
            }
            OnStateChanged();
        }
    }

    private async Task RunAsync(PooledHttp2 pooled)
    {
        try
        {
            await pooled.Connection.RunAsync().ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            Log.ConnectionFailed(_logger, _host, _port, ex.Message);
        }
        finally
        {
            lock (_lock)
            {
                _http2 = Array.FindAll(_http2, p => p != pooled);
            }
            _metrics?.Closed("2");
            OnStateChanged();
            await pooled.Transport.DisposeAsync().ConfigureAwait(false);
        }
    }

    // ---- HTTP/1.1 ----

    private async ValueTask<(BackendExchange, bool)> OpenHttp1Async(BackendRequest request, CancellationToken cancellationToken)
    {
        // Read once: after a wait below the code runs elsewhere.
        var loop = LoopOf(request);
        while (true)
        {
            while (_idleHttp1.TryPop(loop, out var idle))
            {
                if (!idle.Connection.IsReusable)
                {
                    await CloseHttp1Async(idle).ConfigureAwait(false);
                    continue;
                }
                try
                {
                    return (await idle.Connection.SendAsync(request, cancellationToken).ConfigureAwait(false), true);
                }
                catch (Exception) when (idle.Connection.IsReusable)
                {
                    // Refused before the exchange began (an ArgumentException: the request cannot be written): the
                    // connection is as it was, so it goes back idle rather than stay open outside the pool.
                    OnHttp1Released(idle, reusable: true);
                    throw;
                }
                catch (BackendException)
                {
                    // The backend closed it while idle: try the next one. NOTE: not closed here. SendAsync disposed the
                    // failed exchange, whose release closed the connection (OnHttp1Released): a second close counted
                    // it out of _http1Count twice, and the pool then opened past MaxConnections.
                }
            }
            Task changed;
            var connect = false;
            lock (_lock)
            {
                ObjectDisposedException.ThrowIf(_disposed, this);
                changed = ChangedTask();
                if (_http1Count < _settings.MaxConnections)
                {
                    _http1Count++;
                    connect = true;
                }
            }
            if (!connect)
            {
                // A connection released between the idle stack's check above and the task's capture went back to the stack
                // before its change was signalled: look again rather than wait for the next change.
                if (!_idleHttp1.IsEmpty)
                {
                    continue;
                }
                await changed.WaitAsync(cancellationToken).ConfigureAwait(false); // at MaxConnectionsPerServer: wait for one back
                continue;
            }
            PooledHttp1 pooled;
            try
            {
                pooled = await ConnectHttp1Async(loop, cancellationToken).ConfigureAwait(false);
            }
            catch
            {
                Interlocked.Decrement(ref _http1Count);
                OnStateChanged();
                throw;
            }
            try
            {
                return (await pooled.Connection.SendAsync(request, cancellationToken).ConfigureAwait(false), false);
            }
            catch (Exception) when (pooled.Connection.IsReusable)
            {
                OnHttp1Released(pooled, reusable: true); // refused before it began, as above: the new connection waits idle
                throw;
            }
        }
    }

    /// <summary>
    /// Tests: aborts the transport of every idle HTTP/1.1 connection, which stay idle as if their sockets broke while
    /// nobody used them. Returns how many.
    /// </summary>
    internal int AbortIdleHttp1Transports()
    {
        var idle = new List<PooledHttp1>();
        while (_idleHttp1.TryPop(-1, out var pooled))
        {
            idle.Add(pooled);
        }
        foreach (var pooled in idle)
        {
            pooled.Transport.Abort();
            _idleHttp1.Push(pooled, pooled.Transport.Loop);
        }
        return idle.Count;
    }

    /// <summary>
    /// The event loop to serve <paramref name="request"/> on: its client connection's (the pipeline names it), else the
    /// calling thread's (the direct path runs on it), -1 off our epoll engine.
    /// </summary>
    private static int LoopOf(BackendRequest request) => request.EventLoop >= 0 ? request.EventLoop : EventLoop.CurrentIndex;

    /// <param name="loop">The epoll thread the connection should join (-1: the calling thread's, or the next in turn).</param>
    private async Task<PooledHttp1> ConnectHttp1Async(int loop, CancellationToken cancellationToken)
    {
        BackendTransport transport;
        try
        {
            var tls = !_tls ? null : new BackendTlsOptions
            {
                TargetHost = _tlsHost,
                ApplicationProtocols = [SslApplicationProtocol.Http11],
                DangerousAcceptAnyServerCertificate = _settings.DangerousAcceptAnyServerCertificate,
                EnabledSslProtocols = _settings.SslProtocols,
            };
            transport = await BackendConnector.ConnectAsync(_host, _port, tls, _settings.ConnectTimeout, _settings.Sockets, cancellationToken, loop).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
        {
            throw;
        }
        catch (Exception ex)
        {
            throw new BackendException(BackendFailure.Connect, $"Connecting to {_host}:{_port} failed: {ex.Message}", inner: ex);
        }
        return CreateHttp1(transport);
    }

    /// <summary>A connection that negotiated HTTP/1.1 while we hoped for h2: it joins the idle stack.</summary>
    private void AddHttp1(BackendTransport transport)
    {
        Interlocked.Increment(ref _http1Count);
        var pooled = CreateHttp1(transport);
        pooled.IdleSince = _time.GetTimestamp();
        _idleHttp1.Push(pooled, pooled.Transport.Loop);
    }

    private PooledHttp1 CreateHttp1(BackendTransport transport)
    {
        var connection = new Http1ClientConnection(transport.Transport, _settings.Http1);
        var pooled = new PooledHttp1(connection, transport);
        _metrics?.Opened("1.1");
        connection.ExchangeReleased += (_, reusable) => OnHttp1Released(pooled, reusable);
        lock (_lock)
        {
            _sweep ??= _time.CreateTimer(static s => ((BackendPool)s!).Sweep(), this, SweepPeriod, SweepPeriod);
        }
        return pooled;
    }

    private void OnHttp1Released(PooledHttp1 pooled, bool reusable)
    {
        if (reusable && !_disposed)
        {
            pooled.IdleSince = _time.GetTimestamp();
            _idleHttp1.Push(pooled, pooled.Transport.Loop);
        }
        else
        {
            _ = CloseHttp1Async(pooled).AsTask();
        }
        OnStateChanged();
    }

    private async ValueTask CloseHttp1Async(PooledHttp1 pooled)
    {
        Interlocked.Decrement(ref _http1Count);
        _metrics?.Closed("1.1");
        try
        {
            await pooled.Connection.DisposeAsync().ConfigureAwait(false);
            await pooled.Transport.DisposeAsync().ConfigureAwait(false);
        }
        catch (Exception ex)
        {
            Log.ConnectionFailed(_logger, _host, _port, ex.Message);
        }
        OnStateChanged();
    }

    /// <summary>A stream slot freed or a connection changed state: wake requests waiting for a slot.</summary>
    private void OnStateChanged() => Interlocked.Exchange(ref _changed, null)?.TrySetResult();

    /// <summary>
    /// The task the next state change completes. Taken before the state it waits on is read (under the pool's lock), so
    /// a change made after that read completes it.
    /// </summary>
    private Task ChangedTask()
    {
        var changed = Volatile.Read(ref _changed);
        if (changed is null)
        {
            var created = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            changed = Interlocked.CompareExchange(ref _changed, created, null) ?? created;
        }
        return changed.Task;
    }

    private TimeSpan SweepPeriod
    {
        get
        {
            var shortest = _settings.IdleTimeout < _settings.Lifetime || _settings.Lifetime == Timeout.InfiniteTimeSpan ? _settings.IdleTimeout : _settings.Lifetime;
            if (shortest == Timeout.InfiniteTimeSpan)
            {
                return TimeSpan.FromSeconds(30);
            }
            var period = shortest / 4;
            return period < TimeSpan.FromMilliseconds(100) ? TimeSpan.FromMilliseconds(100) : period;
        }
    }

    /// <summary>Closes idle connections past the idle timeout and retires connections past their lifetime (timer).</summary>
    private void Sweep()
    {
        var now = _time.GetTimestamp();
        // A retired pool (its cluster was replaced by a reload) closes connections as soon as they are idle.
        var idleTimeout = _retired ? TimeSpan.Zero : _settings.IdleTimeout;
        if (!_idleHttp1.IsEmpty && idleTimeout != Timeout.InfiniteTimeSpan)
        {
            // Take the idle stack apart and keep the ones still fresh (rare: once per sweep period).
            var keep = new List<PooledHttp1>();
            while (_idleHttp1.TryPop(-1, out var idle))
            {
                if (idle.Connection.IsReusable && _time.GetElapsedTime(idle.IdleSince, now) < idleTimeout && !_retired)
                {
                    keep.Add(idle);
                }
                else
                {
                    _ = CloseHttp1Async(idle).AsTask();
                }
            }
            for (var i = keep.Count - 1; i >= 0; i--)
            {
                _idleHttp1.Push(keep[i], keep[i].Transport.Loop);
            }
            if (keep.Count > 0)
            {
                // A request at MaxConnectionsPerServer that looked while the stack was taken apart waits for a change.
                OnStateChanged();
            }
        }
        foreach (var pooled in _http2)
        {
            var connection = pooled.Connection;
            if (_settings.Lifetime != Timeout.InfiniteTimeSpan && _time.GetElapsedTime(pooled.Created, now) >= _settings.Lifetime)
            {
                connection.StartShutdown(); // no new streams; closes once the open ones finish
                continue;
            }
            if (connection.ActiveStreams > 0)
            {
                pooled.IdleSince = 0;
            }
            else if (pooled.IdleSince == 0)
            {
                pooled.IdleSince = now;
            }
            else if (idleTimeout != Timeout.InfiniteTimeSpan && _time.GetElapsedTime(pooled.IdleSince, now) >= idleTimeout)
            {
                connection.StartShutdown();
            }
        }
        if (_retired)
        {
            lock (_lock)
            {
                if (_http2.Length == 0 && Volatile.Read(ref _http1Count) == 0 && _connecting is null)
                {
                    // Nothing left to watch: the timer (which keeps the pool alive) goes; a late request makes a new one.
                    _sweep?.Dispose();
                    _sweep = null;
                }
            }
        }
    }

    /// <summary>
    /// The cluster was replaced (a reload): requests already routed here still get served, but every connection closes as
    /// soon as it is idle and the pool lets go of its timer once none is left, so replaced clusters do not pile up.
    /// </summary>
    public void Retire() => _retired = true;

    private volatile bool _retired;

    public async ValueTask DisposeAsync()
    {
        PooledHttp2[] connections;
        lock (_lock)
        {
            _disposed = true;
            connections = _http2;
            _sweep?.Dispose();
        }
        foreach (var pooled in connections)
        {
            pooled.Connection.StartShutdown();
        }
        while (_idleHttp1.TryPop(-1, out var idle))
        {
            await CloseHttp1Async(idle).ConfigureAwait(false);
        }
        await Task.WhenAll(connections.Select(p => p.Connection.Completion)).WaitAsync(TimeSpan.FromSeconds(5)).ConfigureAwait(false);
    }
}

internal static partial class Log
{
    [LoggerMessage(1, LogLevel.Debug, "Backend connection to {Host}:{Port} ended: {Reason}")]
    public static partial void ConnectionFailed(ILogger logger, string host, int port, string reason);
}
