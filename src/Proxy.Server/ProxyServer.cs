using System.Collections.Concurrent;
using System.Diagnostics.Metrics;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;
using Proxy.Server.Internal;
using Proxy.Transport.Buffers;
using Proxy.Transport.Certificates;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Server;

// Owned by the host: StartAsync and StopAsync are called once each, in order. The connection
// table is shared with accept loops and connection flows (concurrent dictionary).
/// <summary>
/// An ASP.NET Core <see cref="IServer"/> over our HTTP/1.1 and HTTP/2 engines: binds endpoints,
/// accepts connections, runs TLS, picks the protocol and maps exchanges onto the app.
/// </summary>
public sealed partial class ProxyServer : IServer
{
    private readonly ProxyServerOptions _options;
    private readonly ILoggerFactory _loggerFactory;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly IConnectionProtocolFactory _protocolFactory;
    private readonly IDirectRequestHandler? _direct;
    private readonly ServerMetrics? _metrics;
    private readonly ServerAddressesFeature _addresses = new();
    private readonly FeatureCollection _features = new();
    private readonly List<(IConnectionListener Listener, ListenOptions Endpoint)> _extraListeners = [];
    private readonly List<Task> _acceptLoops = [];
    private readonly List<IConnectionListener> _listeners = [];
    private readonly ConcurrentDictionary<ServerConnection, byte> _connections = new();
    private readonly CancellationTokenSource _stopping = new();
    private ConnectionLimit? _connectionLimit;
    // When the accept loops last warned of the connection bound or of an accept out of descriptors (TimeProvider timestamp).
    private long _lastOutOfConnectionsLog = long.MinValue;
    private ConfiguredEndpoints? _configured;
    // The C heap trim timer's lease, held from start to stop.
    private IDisposable? _nativeHeapTrim;
    private int _state; // 0 new, 1 started, 2 stopped

    /// <summary>The bound on open connections made at start (<see cref="ProxyServerOptions.MaxConcurrentConnections"/>), or null for none.</summary>
    internal ConnectionLimit? ConnectionLimit => _connectionLimit;

    /// <param name="meterFactory">Creates the "Proxy.Server" meter (the host registers one); null: no metrics.</param>
    /// <param name="direct">Takes requests before the app (the proxy's direct path); null: the app gets every request.</param>
    public ProxyServer(IOptions<ProxyServerOptions> options, ILoggerFactory? loggerFactory = null, TimeProvider? time = null, IMeterFactory? meterFactory = null,
        IDirectRequestHandler? direct = null)
        : this(options.Value, loggerFactory, time, EngineProtocolFactory.Instance, meterFactory, direct)
    {
    }

    internal ProxyServer(ProxyServerOptions options, ILoggerFactory? loggerFactory, TimeProvider? time, IConnectionProtocolFactory protocolFactory,
        IMeterFactory? meterFactory = null, IDirectRequestHandler? direct = null)
    {
        _direct = direct;
        _metrics = meterFactory is null ? null : new ServerMetrics(meterFactory);
        _options = options;
        _loggerFactory = loggerFactory ?? NullLoggerFactory.Instance;
        _logger = _loggerFactory.CreateLogger("Proxy.Server");
        _time = time ?? TimeProvider.System;
        _protocolFactory = protocolFactory;
        _features.Set<IServerAddressesFeature>(_addresses);
    }

    public IFeatureCollection Features => _features;

    /// <summary>Test/in-process hook: serve an extra listener (e.g. the in-memory transport) with <paramref name="endpoint"/>'s settings.</summary>
    internal void AddListener(IConnectionListener listener, ListenOptions endpoint) => _extraListeners.Add((listener, endpoint));

    public async Task StartAsync<TContext>(IHttpApplication<TContext> application, CancellationToken cancellationToken) where TContext : notnull
    {
        if (Interlocked.CompareExchange(ref _state, 1, 0) != 0)
        {
            throw new InvalidOperationException("The server has already been started.");
        }
        IHttpRequestHandler handler = new HttpApplicationHandler<TContext>(application, _options, new DateHeaderCache(_time), _logger);
        if (_direct is not null)
        {
            handler = new DirectFirstHandler(_direct, handler);
        }
        var bound = new List<string>();
        try
        {
            _configured = ConfiguredEndpoints.Load(_options.Configuration, (_options.Configuration as IConfigurationSection)?.Path ?? "ProxyServer",
                _options.ContentRootPath ?? Directory.GetCurrentDirectory(), _loggerFactory, _logger);
            _connectionLimit = CreateConnectionLimit();
            _metrics?.SetConnectionLimit(_connectionLimit?.Max);
            var endpoints = ResolveEndpoints();
            foreach (var endpoint in endpoints)
            {
                cancellationToken.ThrowIfCancellationRequested();
                var pipeline = BuildPipeline(endpoint, handler);
                var listeners = Bind(endpoint);
                foreach (var listener in listeners)
                {
                    StartAcceptLoop(listener, pipeline);
                }
                var address = FormatBoundAddress(endpoint, listeners[0].EndPoint);
                bound.Add(address);
                ServerLog.ListeningOn(_logger, address);
            }
            foreach (var (listener, endpoint) in _extraListeners)
            {
                _listeners.Add(listener);
                StartAcceptLoop(listener, BuildPipeline(endpoint, handler));
            }
        }
        catch
        {
            await StopListenersAsync().ConfigureAwait(false);
            _configured?.Dispose();
            throw;
        }

        _nativeHeapTrim = NativeHeapTrimmer.Acquire(_options.Memory.NativeHeapTrimInterval);
        _addresses.Addresses.Clear();
        foreach (var address in bound)
        {
            _addresses.Addresses.Add(address);
        }
    }

    public async Task StopAsync(CancellationToken cancellationToken)
    {
        if (Interlocked.Exchange(ref _state, 2) != 1)
        {
            return;
        }
        _stopping.Cancel();

        // Step 1: stop accepting (and stop watching certificate files).
        await StopListenersAsync().ConfigureAwait(false);
        _configured?.Dispose();
        _nativeHeapTrim?.Dispose();

        // Step 2: ask every connection to finish what it started (GOAWAY for HTTP/2).
        var connections = _connections.Keys.ToArray();
        ServerLog.ShuttingDown(_logger, connections.Length);
        foreach (var connection in connections)
        {
            connection.RequestShutdown();
        }

        // Step 3: wait until they are done or the host's patience runs out, then abort the rest.
        var all = Task.WhenAll(connections.Select(c => c.Completion));
        try
        {
            await all.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
            var remaining = _connections.Keys.ToArray();
            ServerLog.AbortingConnections(_logger, remaining.Length);
            foreach (var connection in remaining)
            {
                connection.Abort();
            }
            // Aborted flows end promptly (their transports fail); bound the wait regardless.
            await Task.WhenAny(all, Task.Delay(TimeSpan.FromSeconds(5), _time)).ConfigureAwait(false);
        }
    }

    public void Dispose()
    {
        StopAsync(new CancellationToken(canceled: true)).GetAwaiter().GetResult();
        _stopping.Dispose();
    }
}
