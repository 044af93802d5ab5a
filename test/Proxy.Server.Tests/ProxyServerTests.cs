using Microsoft.Extensions.Configuration;
using System.Buffers;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Transport.Certificates;
using Proxy.Transport.InMemory;

namespace Proxy.Server.Tests;

public class ProxyServerTests
{
    private static readonly DelegateApplication NoApp = new(_ => Task.CompletedTask);

    private static ProxyServer Create(ProxyServerOptions options, FakeProtocolFactory factory)
        => new(options, NullLoggerFactory.Instance, TimeProvider.System, factory);

    private static string[] Addresses(IServer server) => [.. server.Features.Get<IServerAddressesFeature>()!.Addresses];

    private static async Task<string> ConnectAndReadLineAsync(int port, byte[] firstBytes)
    {
        using var client = new TcpClient();
        await client.ConnectAsync(IPAddress.Loopback, port);
        var stream = client.GetStream();
        await stream.WriteAsync(firstBytes);
        using var reader = new StreamReader(stream, Encoding.ASCII);
        return (await reader.ReadLineAsync().WaitAsync(Patience.Long))!;
    }

    [Fact]
    public async Task StartAsync_UrlWithPortZero_ReportsBoundPort()
    {
        var factory = new FakeProtocolFactory();
        using var server = Create(new ProxyServerOptions(), factory);
        server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("http://127.0.0.1:0");

        await server.StartAsync(NoApp, CancellationToken.None);

        var address = Assert.Single(Addresses(server));
        var uri = new Uri(address);
        Assert.Equal("127.0.0.1", uri.Host);
        Assert.NotEqual(0, uri.Port);
        Assert.Equal("HTTP/1.1", await ConnectAndReadLineAsync(uri.Port, "GET / HTTP/1.1\r\n"u8.ToArray()));
        await server.StopAsync(CancellationToken.None);
    }

    [Fact]
    public async Task StartAsync_LocalhostPortZero_ReportsLocalhostWithRealPort()
    {
        using var server = Create(new ProxyServerOptions(), new FakeProtocolFactory());
        server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("http://localhost:0");

        await server.StartAsync(NoApp, CancellationToken.None);

        var uri = new Uri(Assert.Single(Addresses(server)));
        Assert.Equal("localhost", uri.Host);
        Assert.NotEqual(0, uri.Port);
        await server.StopAsync(CancellationToken.None);
    }

    [Fact]
    public async Task StartAsync_ListenOptionsPortZero_OverrideUrlsAndReportPort()
    {
        var options = new ProxyServerOptions();
        options.Listen(IPAddress.Loopback, 0);
        using var server = Create(options, new FakeProtocolFactory());
        server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("http://127.0.0.1:1"); // Ignored: code wins unless PreferHostingUrls.

        await server.StartAsync(NoApp, CancellationToken.None);

        var uri = new Uri(Assert.Single(Addresses(server)));
        Assert.NotEqual(0, uri.Port);
        Assert.NotEqual(1, uri.Port);
        await server.StopAsync(CancellationToken.None);
    }

    [Fact]
    public async Task Connection_CleartextPreface_SelectsHttp2()
    {
        var factory = new FakeProtocolFactory();
        using var server = Create(new ProxyServerOptions(), factory);
        server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("http://127.0.0.1:0");
        await server.StartAsync(NoApp, CancellationToken.None);
        var port = new Uri(Addresses(server)[0]).Port;

        var line = await ConnectAndReadLineAsync(port, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8.ToArray());

        Assert.Equal("HTTP/2", line);
        var protocol = await factory.Created.Reader.ReadAsync();
        Assert.False(protocol.Metadata.IsTls);
        Assert.Equal("http", protocol.Metadata.Scheme);
        // The preface was peeked, not consumed: the engine reads it itself.
        var peeked = await protocol.Transport.Input.ReadAtLeastAsync(24);
        Assert.Equal("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Encoding.ASCII.GetString(peeked.Buffer.Slice(0, 24).ToArray()));
        protocol.Transport.Input.AdvanceTo(peeked.Buffer.Start);
        await server.StopAsync(CancellationToken.None);
    }

    [Fact]
    public async Task Connection_Http1OnlyEndpoint_PrefaceStillHttp1()
    {
        var options = new ProxyServerOptions();
        options.Listen(IPAddress.Loopback, 0, listen => listen.Protocols = HttpProtocols.Http1);
        using var server = Create(options, new FakeProtocolFactory());
        await server.StartAsync(NoApp, CancellationToken.None);
        var port = new Uri(Addresses(server)[0]).Port;

        Assert.Equal("HTTP/1.1", await ConnectAndReadLineAsync(port, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8.ToArray()));
        await server.StopAsync(CancellationToken.None);
    }

    [Theory]
    [InlineData("h2", "HTTP/2")]
    [InlineData("http/1.1", "HTTP/1.1")]
    public async Task Connection_TlsAlpn_SelectsProtocol(string alpn, string expected)
    {
        using var certificate = CreateCertificate();
        var factory = new FakeProtocolFactory();
        using var server = Create(new ProxyServerOptions(), factory);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 443)).UseHttps(certificate));
        await server.StartAsync(NoApp, CancellationToken.None);

        var client = await memory.ConnectAsync();
        await using var ssl = new SslStream(client.Stream);
        await ssl.AuthenticateAsClientAsync(new SslClientAuthenticationOptions
        {
            TargetHost = "localhost",
            ApplicationProtocols = [new SslApplicationProtocol(alpn)],
            RemoteCertificateValidationCallback = (_, _, _, _) => true,
        }).WaitAsync(Patience.Long);
        using var reader = new StreamReader(ssl, Encoding.ASCII);

        Assert.Equal(expected, await reader.ReadLineAsync().WaitAsync(Patience.Long));
        var protocol = await factory.Created.Reader.ReadAsync();
        Assert.True(protocol.Metadata.IsTls);
        Assert.Equal(alpn, protocol.Metadata.ApplicationProtocol);
        Assert.Equal("https", protocol.Metadata.Scheme);
        await server.StopAsync(CancellationToken.None);
    }

    /// <summary>At the bound the accept loop waits: the next connection is accepted only once an open one ends.</summary>
    [Fact]
    public async Task Accept_MaxConcurrentConnectionsOpen_NextAcceptedWhenOneCloses()
    {
        var factory = new FakeProtocolFactory();
        using var server = Create(new ProxyServerOptions { MaxConcurrentConnections = 1 }, factory);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(NoApp, CancellationToken.None);

        var first = await memory.ConnectAsync();
        await first.Transport.Output.WriteAsync("GET / HTTP/1.1\r\n"u8.ToArray());
        var firstProtocol = await factory.Created.Reader.ReadAsync().AsTask().WaitAsync(Patience.Long);
        var limit = server.ConnectionLimit!;
        Assert.True(SpinWait.SpinUntil(() => limit.AcceptsWaiting == 1, Patience.Long), "the accept loop did not wait");

        var second = await memory.ConnectAsync();
        await second.Transport.Output.WriteAsync("GET / HTTP/1.1\r\n"u8.ToArray());
        Assert.False(factory.Created.Reader.TryRead(out _)); // not accepted while the first is open

        await firstProtocol.ShutdownAsync(); // the first connection ends
        await factory.Created.Reader.ReadAsync().AsTask().WaitAsync(Patience.Long);
        Assert.Equal(1, limit.Open);
        await server.StopAsync(new CancellationToken(canceled: true));
    }

    /// <summary>
    /// An accept that fails for want of descriptors is retried after a pause (10 ms, doubling), not at once, with one
    /// warning for the burst; the connection waiting behind it is then accepted. The clock is a fake one: the test
    /// moves it until the connection is in.
    /// </summary>
    [Fact]
    public async Task Accept_OutOfDescriptors_WaitsThenAcceptsAndWarnsOnce()
    {
        var time = new Microsoft.Extensions.Time.Testing.FakeTimeProvider();
        var logs = new RecordingLoggerProvider();
        using var loggers = LoggerFactory.Create(builder => builder.AddProvider(logs));
        var factory = new FakeProtocolFactory();
        using var services = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var meters = services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>();
        using var metrics = new Proxy.Testing.MetricRecorder("Proxy.Server", meters);
        using var server = new ProxyServer(new ProxyServerOptions(), loggers, time, factory, meters);
        await using var memory = new InMemoryConnectionListener();
        var listener = new FailingListener(memory, failures: 3);
        server.AddListener(listener, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(NoApp, CancellationToken.None);

        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\n"u8.ToArray());
        Assert.True(SpinWait.SpinUntil(() =>
        {
            time.Advance(TimeSpan.FromMilliseconds(10));
            return factory.Created.Reader.TryRead(out _);
        }, Patience.Long), "the connection was never accepted");

        Assert.InRange(listener.Calls, 4, 5); // three failures, the accept, and maybe already the loop's next wait
        Assert.Single(logs.Messages, m => m.Contains("Accepting a connection failed", StringComparison.Ordinal));
        // Each back-off step is a pause of the accept loop: 10, 20 and 40 ms.
        var pauses = metrics.Of("proxy.server.accept.pause_duration");
        Assert.Equal([0.01, 0.02, 0.04], pauses.Select(p => p.Value));
        Assert.All(pauses, p => Assert.Equal("out_of_resources", p.Tag("proxy.accept.pause_reason")));
        await server.StopAsync(new CancellationToken(canceled: true));
    }

    /// <summary>A listener whose first accepts fail as an accept does when the process is out of descriptors (EMFILE).</summary>
    private sealed class FailingListener(InMemoryConnectionListener inner, int failures) : IConnectionListener
    {
        private int _calls;

        public int Calls => Volatile.Read(ref _calls);

        public EndPoint EndPoint => inner.EndPoint;

        public ValueTask<ConnectionContext?> AcceptAsync(CancellationToken cancellationToken = default)
            => Interlocked.Increment(ref _calls) <= failures
                ? ValueTask.FromException<ConnectionContext?>(new System.Net.Sockets.SocketException((int)System.Net.Sockets.SocketError.TooManyOpenSockets))
                : inner.AcceptAsync(cancellationToken);

        public ValueTask UnbindAsync(CancellationToken cancellationToken = default) => inner.UnbindAsync(cancellationToken);

        public ValueTask DisposeAsync() => ValueTask.CompletedTask;
    }

    /// <summary>Keeps every formatted message.</summary>
    private sealed class RecordingLoggerProvider : ILoggerProvider
    {
        private readonly System.Collections.Concurrent.ConcurrentQueue<string> _messages = new();

        public IReadOnlyCollection<string> Messages => [.. _messages];

        public ILogger CreateLogger(string categoryName) => new Recorder(_messages);

        public void Dispose()
        {
        }

        private sealed class Recorder(System.Collections.Concurrent.ConcurrentQueue<string> messages) : ILogger
        {
            public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => true;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
                => messages.Enqueue(formatter(state, exception));
        }
    }

    [Theory]
    [InlineData(0L, true)]
    [InlineData(-1L, false)]
    public async Task Start_MaxConcurrentConnections_ZeroMeansNoBoundNegativeFails(long value, bool starts)
    {
        using var server = Create(new ProxyServerOptions { MaxConcurrentConnections = value }, new FakeProtocolFactory());
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        if (starts)
        {
            await server.StartAsync(NoApp, CancellationToken.None);
            Assert.Null(server.ConnectionLimit);
            await server.StopAsync(CancellationToken.None);
        }
        else
        {
            var error = await Assert.ThrowsAsync<InvalidOperationException>(() => server.StartAsync(NoApp, CancellationToken.None));
            Assert.Contains("ProxyServer:MaxConcurrentConnections", error.Message);
        }
    }

    [Fact]
    public async Task Start_NoMaxConcurrentConnections_OnLinuxBoundFromTheOpenFileLimit()
    {
        using var server = Create(new ProxyServerOptions(), new FakeProtocolFactory());
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(NoApp, CancellationToken.None);
        var limit = server.ConnectionLimit;
        if (OperatingSystem.IsLinux())
        {
            var fileLimit = long.Parse(File.ReadLines("/proc/self/limits").First(l => l.StartsWith("Max open files", StringComparison.Ordinal))
                .Split(' ', StringSplitOptions.RemoveEmptyEntries)[3]);
            Assert.NotNull(limit);
            Assert.InRange(limit.Max, 16, fileLimit - Math.Max(256, fileLimit / 8));
        }
        else
        {
            Assert.Null(limit);
        }
        await server.StopAsync(CancellationToken.None);
    }

    [Fact]
    public async Task StopAsync_OpenConnection_AskedToShutDownGracefully()
    {
        var factory = new FakeProtocolFactory();
        var server = Create(new ProxyServerOptions(), factory);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(NoApp, CancellationToken.None);
        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\n"u8.ToArray());
        var protocol = await factory.Created.Reader.ReadAsync().AsTask().WaitAsync(Patience.Long);

        await server.StopAsync(CancellationToken.None).WaitAsync(Patience.Long);

        Assert.True(protocol.ShutdownCalled);
        Assert.False(protocol.Aborted);
    }

    [Fact]
    public async Task StopAsync_ConnectionIgnoresShutdown_AbortedWhenTokenFires()
    {
        var factory = new FakeProtocolFactory { IgnoreShutdown = true };
        var server = Create(new ProxyServerOptions(), factory);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(NoApp, CancellationToken.None);
        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\n"u8.ToArray());
        var protocol = await factory.Created.Reader.ReadAsync().AsTask().WaitAsync(Patience.Long);

        using var patience = new CancellationTokenSource();
        var stop = server.StopAsync(patience.Token);
        Assert.False(stop.IsCompleted); // Waiting for the connection to finish.
        patience.Cancel();
        await stop.WaitAsync(Patience.Long);

        Assert.True(protocol.ShutdownCalled);
        Assert.True(protocol.Aborted);
    }

    [Fact]
    public async Task StopAsync_StopsAccepting()
    {
        using var server = Create(new ProxyServerOptions(), new FakeProtocolFactory());
        server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("http://127.0.0.1:0");
        await server.StartAsync(NoApp, CancellationToken.None);
        var port = new Uri(Addresses(server)[0]).Port;
        await server.StopAsync(CancellationToken.None);

        using var client = new TcpClient();
        await Assert.ThrowsAnyAsync<SocketException>(() => client.ConnectAsync(IPAddress.Loopback, port));
    }

    [Fact]
    public async Task UseProxyServer_WebApplicationWithPortZero_ServerIsOursAndReportsPort()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer(options => options.AddServerHeader = false);
        await using var app = builder.Build();
        app.MapGet("/", () => "hi");

        await app.StartAsync();
        var server = app.Services.GetRequiredService<IServer>();

        Assert.IsType<ProxyServer>(server);
        Assert.False(app.Services.GetRequiredService<Microsoft.Extensions.Options.IOptions<ProxyServerOptions>>().Value.AddServerHeader);
        var uri = new Uri(Assert.Single(Addresses(server)));
        Assert.NotEqual(0, uri.Port);
        Assert.Contains(app.Urls, url => url == uri.ToString().TrimEnd('/'));
        await app.StopAsync();
    }

    [Fact]
    public async Task UseProxyServer_ConfigurationSection_BindsLimitsAndCodeRunsAfter()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Configuration.AddInMemoryCollection(new Dictionary<string, string?>
        {
            ["ProxyServer:Http2:MaxConcurrentStreams"] = "250",
            ["ProxyServer:Http2:KeepAliveTimeout"] = "00:00:42",
            ["ProxyServer:Http1:MaxRequestHeaderCount"] = "50",
            ["ProxyServer:AddServerHeader"] = "false",
        });
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer(options => options.Http1.MaxRequestHeaderCount += 1);
        await using var app = builder.Build();

        var options = app.Services.GetRequiredService<Microsoft.Extensions.Options.IOptions<ProxyServerOptions>>().Value;

        Assert.Equal(250, options.Http2.MaxConcurrentStreams);
        Assert.Equal(TimeSpan.FromSeconds(42), options.Http2.KeepAliveTimeout);
        Assert.Equal(51, options.Http1.MaxRequestHeaderCount);
        Assert.False(options.AddServerHeader);
    }

    [Theory]
    [InlineData("ProxyServer:AllowAlternateSchemes")]
    [InlineData("ProxyServer:Http2:AllowAlternateSchemes")]
    public async Task UseProxyServer_AllowAlternateSchemesKey_ReachesTheHttp2Options(string key)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Configuration.AddInMemoryCollection(new Dictionary<string, string?> { [key] = "true" });
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer();
        await using var app = builder.Build();

        var options = app.Services.GetRequiredService<Microsoft.Extensions.Options.IOptions<ProxyServerOptions>>().Value;

        // Kestrel's top-level name and ours under Http2 are one setting; off unless configured.
        Assert.True(options.Http2.AllowAlternateSchemes);
        Assert.True(options.AllowAlternateSchemes);
        Assert.False(new ProxyServerOptions().AllowAlternateSchemes);
    }

    [Fact]
    public async Task StartAsync_HttpsUrlWithoutCertificate_UsesDevelopmentCertificate()
    {
        var directory = Path.Combine(Path.GetTempPath(), "proxy-server-devcert-" + Guid.NewGuid().ToString("N"));
        try
        {
            using var server = Create(new ProxyServerOptions { DevelopmentCertificateDirectory = directory }, new FakeProtocolFactory());
            server.Features.Get<IServerAddressesFeature>()!.Addresses.Add("https://127.0.0.1:0");
            await server.StartAsync(NoApp, CancellationToken.None);

            var uri = new Uri(Assert.Single(Addresses(server)));
            Assert.Equal("https", uri.Scheme);
            Assert.True(File.Exists(Path.Combine(directory, DevelopmentCertificate.FileName)));
            await server.StopAsync(CancellationToken.None);
        }
        finally
        {
            Directory.Delete(directory, recursive: true);
        }
    }

    private static X509Certificate2 CreateCertificate()
    {
        using var created = DevelopmentCertificate.Create(DateTimeOffset.UtcNow);
        return X509CertificateLoader.LoadPkcs12(created.Export(X509ContentType.Pfx), password: null);
    }
}
