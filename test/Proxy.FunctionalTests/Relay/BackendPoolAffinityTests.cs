using System.Net;
using System.Net.Sockets;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Forwarding;
using Proxy.Forwarding.Configuration;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;
using Proxy.Server;
using Proxy.Protocols.Client;
using Proxy.Relay;
using Proxy.Transport.Sockets;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// On our epoll engine a destination's HTTP/2 connections belong to epoll threads: a request takes a connection of the
/// thread it runs on; finding only another thread's, it rides that one while a connection for its own thread opens.
/// </summary>
public sealed class BackendPoolAffinityTests
{
    private static readonly SocketTransportOptions Epoll = new() { Engine = SocketEngine.Epoll, InlineScheduling = true };

    [Fact]
    public async Task Http2_RequestOnASecondEpollThread_RidesTheFirstThreadsConnection_ThenItsOwnOpens()
    {
        if (!OperatingSystem.IsLinux() || Environment.ProcessorCount < 2)
        {
            return; // one epoll thread (one per core), or none: nothing to keep apart
        }

        await using var backend = ScriptedHttp2Backend.Start(async c => await Task.Delay(Timeout.Infinite, c.Stopping));
        await using var pool = new BackendPool(backend.Address.ToString(), new BackendPoolSettings { PreferHttp2 = true, Sockets = Epoll },
            NullLogger.Instance, TimeProvider.System);
        await using var loops = await TwoEpollThreads.StartAsync();
        var exchanges = new List<BackendExchange>();
        try
        {
            // The first request, on thread A, opens the first connection there.
            exchanges.Add((await loops.RunOnAsync(loops.A, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);
            Assert.Equal([(loops.A, 1)], pool.Http2Connections);

            // A request on thread B finds only A's connection: it goes there at once, and B's own connection opens beside it.
            exchanges.Add((await loops.RunOnAsync(loops.B, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);
            Assert.Contains((loops.A, 2), pool.Http2Connections);
            if (pool.PendingConnect is { } connecting)
            {
                await connecting.WaitAsync(RelayProxy.Bound);
            }
            Assert.Equal(new[] { loops.A, loops.B }.Order(), pool.Http2Connections.Select(c => c.Loop).Order());

            // The next request on B takes B's connection; one on A still takes A's.
            exchanges.Add((await loops.RunOnAsync(loops.B, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);
            exchanges.Add((await loops.RunOnAsync(loops.A, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);
            var streams = pool.Http2Connections.ToDictionary(c => c.Loop, c => c.ActiveStreams);
            Assert.Equal(3, streams[loops.A]);
            Assert.Equal(1, streams[loops.B]);
        }
        finally
        {
            foreach (var exchange in exchanges)
            {
                exchange.Abort();
                await exchange.DisposeAsync();
            }
        }
        Assert.Empty(backend.Faults);
    }

    [Fact]
    public async Task Http2_MultipleConnectionsOff_EveryThreadSharesOne()
    {
        if (!OperatingSystem.IsLinux() || Environment.ProcessorCount < 2)
        {
            return;
        }

        await using var backend = ScriptedHttp2Backend.Start(async c => await Task.Delay(Timeout.Infinite, c.Stopping));
        await using var pool = new BackendPool(backend.Address.ToString(),
            new BackendPoolSettings { PreferHttp2 = true, EnableMultipleHttp2Connections = false, Sockets = Epoll }, NullLogger.Instance, TimeProvider.System);
        await using var loops = await TwoEpollThreads.StartAsync();
        var exchanges = new List<BackendExchange>();
        try
        {
            exchanges.Add((await loops.RunOnAsync(loops.A, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);
            exchanges.Add((await loops.RunOnAsync(loops.B, () => pool.OpenAsync(Request(), CancellationToken.None))).Exchange);

            Assert.Null(pool.PendingConnect);
            Assert.Single(pool.Http2Connections);
            Assert.Equal(2, pool.Http2Connections[0].ActiveStreams);
        }
        finally
        {
            foreach (var exchange in exchanges)
            {
                exchange.Abort();
                await exchange.DisposeAsync();
            }
        }
    }

    /// <summary>
    /// On the pipeline the request runs on the thread pool, so the pool cannot read the event loop from its thread: the
    /// client connection's loop travels with the request (our server's connection metadata), and each thread's client
    /// connections get a backend connection of that thread.
    /// </summary>
    [Fact]
    public async Task Pipeline_ClientConnectionsOnTwoEpollThreads_EachThreadGetsItsOwnBackendConnection()
    {
        if (!OperatingSystem.IsLinux() || Environment.ProcessorCount < 2)
        {
            return;
        }

        await using var backend = ScriptedHttp2Backend.Start(async c =>
        {
            await foreach (var request in c.RequestsAsync())
            {
                await c.RespondAsync(request.StreamId, "ok");
            }
        });
        var clientLoops = new System.Collections.Concurrent.ConcurrentDictionary<string, int>();
        await using var proxy = await TestHost.StartAsync(ServerKind.ProxyServer, app =>
        {
            app.Use(async (context, next) =>
            {
                clientLoops[context.Request.Path.Value!] = ((Proxy.Server.Features.RequestFeatures)context.Features).Exchange.Connection.EventLoop;
                await next(context);
            });
            app.MapProxyForwarding();
        }, https: true, configureServices: s => s.Configure<ProxyServerOptions>(o => o.Sockets.Engine = SocketEngine.Epoll), configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(new ReverseProxyKeys().NativeRoute("r", "h2", backend.Address.ToString(), h2c: true));
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        });

        // Client connections take the epoll threads in turn: a few meet both.
        var clients = new List<HttpClient>();
        try
        {
            for (var i = 0; i < 16 && clientLoops.Values.Distinct().Count() < 2; i++)
            {
                var client = RelayProxy.CreateClient(proxy);
                clients.Add(client);
                Assert.Equal("ok", await client.GetStringAsync($"/r/{i}").WaitAsync(RelayProxy.Bound));
            }
            var loops = clientLoops.Values.Distinct().Order().ToArray();
            Assert.Equal(2, loops.Length);
            Assert.All(loops, loop => Assert.InRange(loop, 0, Environment.ProcessorCount - 1));

            var manager = proxy.App.Services.GetRequiredService<ProxyStateManager>();
            var pool = Assert.Single(((NativeClusterTransport)manager.Current.Clusters["h2"].NativeTransport!).Pools);
            if (pool.PendingConnect is { } connecting)
            {
                await connecting.WaitAsync(RelayProxy.Bound); // the second thread's, opened beside its first request
            }
            Assert.Equal(loops, pool.Http2Connections.Select(c => c.Loop).Order());
        }
        finally
        {
            clients.ForEach(c => c.Dispose());
        }
        Assert.Empty(backend.Faults);
    }

    private static BackendRequest Request() => new() { Method = "GET", Authority = "backend", PathAndQuery = "/" };

    /// <summary>
    /// Accepted connections on two different epoll threads of the shared engine, to run code on either: a read that waits
    /// continues on the thread serving its socket, as a request's handler does.
    /// </summary>
    private sealed class TwoEpollThreads : IAsyncDisposable
    {
        private readonly SocketConnectionListener _listener;
        private readonly List<(Socket Client, ConnectionContext Server)> _connections = [];
        private (Socket Client, ConnectionContext Server)? _a;
        private (Socket Client, ConnectionContext Server)? _b;

        private TwoEpollThreads(SocketConnectionListener listener) => _listener = listener;

        public int A { get; private set; } = -1;
        public int B { get; private set; } = -1;

        public static async Task<TwoEpollThreads> StartAsync()
        {
            var loops = new TwoEpollThreads(SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), Epoll));
            // Accepted sockets take the threads in turn (other tests' sockets take turns too): a few are enough to meet both.
            for (var i = 0; i < 64 && loops._b is null; i++)
            {
                var client = new Socket(SocketType.Stream, ProtocolType.Tcp);
                await client.ConnectAsync(loops._listener.EndPoint);
                var server = (await loops._listener.AcceptAsync())!;
                loops._connections.Add((client, server));
                var loop = await RunOnAsync(server, client, () => ValueTask.FromResult(EventLoop.CurrentIndex));
                Assert.True(loop >= 0, "a read continuation did not run on an epoll thread");
                if (loops._a is null)
                {
                    (loops._a, loops.A) = ((client, server), loop);
                }
                else if (loop != loops.A)
                {
                    (loops._b, loops.B) = ((client, server), loop);
                }
            }
            Assert.NotNull(loops._b);
            return loops;
        }

        /// <summary>Starts <paramref name="work"/> on epoll thread <paramref name="loop"/> (A or B) and awaits it.</summary>
        public Task<T> RunOnAsync<T>(int loop, Func<ValueTask<T>> work)
        {
            var (client, server) = loop == A ? _a!.Value : _b!.Value;
            return RunOnAsync(server, client, work);
        }

        private static async Task<T> RunOnAsync<T>(ConnectionContext server, Socket client, Func<ValueTask<T>> work)
        {
            var started = new TaskCompletionSource<Task<T>>(TaskCreationOptions.RunContinuationsAsynchronously);
            var read = server.Transport.Input.ReadAsync();
            _ = ContinueAsync(read);
            await client.SendAsync("x"u8.ToArray());
            return await (await started.Task.WaitAsync(RelayProxy.Bound)).WaitAsync(RelayProxy.Bound);

            async Task ContinueAsync(ValueTask<System.IO.Pipelines.ReadResult> pending)
            {
                try
                {
                    var result = await pending.ConfigureAwait(false);
                    server.Transport.Input.AdvanceTo(result.Buffer.End);
                    started.TrySetResult(work().AsTask()); // its synchronous part runs here, on the socket's epoll thread
                }
                catch (Exception ex)
                {
                    started.TrySetException(ex);
                }
            }
        }

        public async ValueTask DisposeAsync()
        {
            foreach (var (client, server) in _connections)
            {
                client.Dispose();
                await server.DisposeAsync();
            }
            await _listener.DisposeAsync();
        }
    }
}
