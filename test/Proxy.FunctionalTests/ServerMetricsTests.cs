using System.Diagnostics.Metrics;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Codecs.Http2;
using Proxy.FunctionalTests.Hosting;
using Proxy.Server;
using Proxy.Testing;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests;

/// <summary>
/// The "Proxy.Server" meter over real sockets: HttpClient (h1, h2c, TLS) and a scripted HTTP/2 peer drive our
/// server, a <see cref="MetricRecorder"/> scoped to the host's IMeterFactory waits for each measurement.
/// </summary>
public sealed class ServerMetricsTests
{
    private static readonly TimeSpan s_hangLimit = TimeSpan.FromSeconds(30); // turns a hang into a failure, never a pass
    private readonly TaskCompletionSource _waitArrived = new(TaskCreationOptions.RunContinuationsAsynchronously);

    private async Task<(TestHost Host, MetricRecorder Metrics)> StartAsync(Action<ProxyServerOptions>? configure = null)
    {
        var host = await TestHost.StartAsync(ServerKind.ProxyServer, app =>
        {
            app.MapGet("/hello", () => "hello");
            app.MapGet("/big", () => new string('x', 1000));
            app.MapGet("/abort", async (HttpContext ctx) =>
            {
                await ctx.Response.StartAsync();
                ctx.Abort();
            });
            app.MapGet("/wait", async (HttpContext ctx) =>
            {
                _waitArrived.TrySetResult();
                await Task.Delay(Timeout.Infinite, ctx.RequestAborted).ContinueWith(_ => { });
            });
        }, configureServices: services =>
        {
            if (configure is not null)
            {
                services.Configure(configure);
            }
        });
        return (host, new MetricRecorder("Proxy.Server", host.App.Services.GetRequiredService<IMeterFactory>()));
    }

    public static TheoryData<HttpTransport> Transports => [HttpTransport.Http11Cleartext, HttpTransport.Http2Cleartext, HttpTransport.Http11Tls, HttpTransport.Http2Tls];

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Connection_Request_CountedWithProtocolTlsAndEndpoint(HttpTransport transport)
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        var http2 = transport is HttpTransport.Http2Cleartext or HttpTransport.Http2Tls;
        var tls = transport is HttpTransport.Http11Tls or HttpTransport.Http2Tls;
        var port = host.AddressFor(transport).Port;
        var version = http2 ? "2" : "1.1";

        using (var client = TestClients.Create(host, transport))
        {
            Assert.Equal("hello", await client.GetStringAsync("/hello"));
            await metrics.WaitAsync("proxy.server.connections",
                m => m.Value == 1 && m.Tag("network.protocol.version") == version && m.Tag("tls") == (tls ? "true" : "false"));
            var active = await metrics.WaitAsync("kestrel.active_connections", m => m.Value == 1 && m.Tag("server.port") == port.ToString());
            Assert.Equal("127.0.0.1", active.Tag("server.address"));
            Assert.Equal("ipv4", active.Tag("network.type"));
            Assert.Equal("tcp", active.Tag("network.transport"));
            await metrics.WaitAsync("proxy.server.io", m => m.Tag("network.io.direction") == "receive" && m.Value > 0);
            await metrics.WaitAsync("proxy.server.io", m => m.Tag("network.io.direction") == "transmit" && m.Value > 0);
            if (http2)
            {
                // A level the meter reads when collected: back at 0 once the request is done (1 while one runs: below).
                await metrics.WaitForCurrentAsync("proxy.server.http2.active_streams", v => v == 0);
                await metrics.WaitAsync("proxy.server.writer.batch.frames", m => m.Value >= 1);
                await metrics.WaitAsync("proxy.server.writer.batch.bytes", m => m.Value >= 9);
            }
            if (tls)
            {
                var handshake = await metrics.WaitAsync("kestrel.tls_handshake.duration");
                Assert.Contains(handshake.Tag("tls.protocol.version"), new[] { "1.2", "1.3" });
                Assert.Null(handshake.Tag("error.type"));
                await metrics.WaitAsync("kestrel.active_tls_handshakes", m => m.Value == 1);
                await metrics.WaitAsync("kestrel.active_tls_handshakes", m => m.Value == -1);
            }
        }

        // The client closed its connection: the server sees the end and records it.
        var duration = await metrics.WaitAsync("kestrel.connection.duration", m => m.Tag("server.port") == port.ToString());
        Assert.Equal("http", duration.Tag("network.protocol.name"));
        Assert.Equal(version, duration.Tag("network.protocol.version"));
        Assert.Equal(tls, duration.Tag("tls.protocol.version") is not null);
        await metrics.WaitAsync("kestrel.active_connections", m => m.Value == -1 && m.Tag("server.port") == port.ToString());
        Assert.Empty(metrics.Of("proxy.server.http2.stream_resets"));
    }

    [Fact]
    public async Task Http2_ClientResetsStream_CountsReceivedCancel()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);
        await peer.SendRequestHeadersAsync(1, "GET", "/wait");
        await _waitArrived.Task.WaitAsync(TimeSpan.FromSeconds(20));
        Assert.Equal(1, metrics.Current("proxy.server.http2.active_streams"));

        await peer.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        await metrics.WaitAsync("proxy.server.http2.stream_resets", m => m.Tag("proxy.side") == "received" && m.Tag("error.type") == "CANCEL");
        await metrics.WaitForCurrentAsync("proxy.server.http2.active_streams", v => v == 0);
    }

    [Fact]
    public async Task Http2_AppAbortsRequest_CountsSentInternalError()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);

        await peer.SendRequestHeadersAsync(1, "GET", "/abort");

        // What the app flushed before its abort (its response headers) goes out before the RST_STREAM.
        await peer.ExpectHeadersAsync(1);
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.InternalError);
        await metrics.WaitAsync("proxy.server.http2.stream_resets", m => m.Tag("proxy.side") == "sent" && m.Tag("error.type") == "INTERNAL_ERROR");
    }

    [Fact]
    public async Task Http2_OverConcurrencyLimit_CountsRefusedStream()
    {
        var (host, metrics) = await StartAsync(o => o.Http2.MaxConcurrentStreams = 1);
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);
        await peer.SendRequestHeadersAsync(1, "GET", "/wait");
        await _waitArrived.Task.WaitAsync(TimeSpan.FromSeconds(20));

        await peer.SendRequestHeadersAsync(3, "GET", "/hello");

        await peer.ExpectRstStreamAsync(3, Http2ErrorCode.RefusedStream);
        await metrics.WaitAsync("proxy.server.http2.refused_streams", m => m.Value == 1);
        await metrics.WaitAsync("proxy.server.http2.stream_resets", m => m.Tag("proxy.side") == "sent" && m.Tag("error.type") == "REFUSED_STREAM");
    }

    [Fact]
    public async Task Http2_PeerSendsGoAway_CountedAsReceived()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);

        await peer.SendGoAwayAsync(0, Http2ErrorCode.NoError);

        await metrics.WaitAsync("proxy.server.http2.goaways", m => m.Tag("proxy.side") == "received" && m.Tag("error.type") == "NO_ERROR");
    }

    [Fact]
    public async Task Http2_ProtocolError_GoAwaySentAndConnectionEndsWithErrorType()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);

        // RFC 9113 §6.1: DATA on stream 0 is a PROTOCOL_ERROR connection error.
        await peer.SendDataAsync(0, new byte[1], endStream: false);

        await peer.ExpectGoAwayAsync(Http2ErrorCode.ProtocolError);
        await metrics.WaitAsync("proxy.server.http2.goaways", m => m.Tag("proxy.side") == "sent" && m.Tag("error.type") == "PROTOCOL_ERROR");
        var duration = await metrics.WaitAsync("kestrel.connection.duration");
        Assert.Equal("protocol_error", duration.Tag("error.type"));
    }

    [Fact]
    public async Task Http2_ServerStops_GoAwayNoErrorCountedAsSent()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        await using var peer = await ConnectAsync(host);

        var stopping = host.App.StopAsync();

        await peer.ExpectGoAwayAsync(Http2ErrorCode.NoError);
        await metrics.WaitAsync("proxy.server.http2.goaways", m => m.Tag("proxy.side") == "sent" && m.Tag("error.type") == "NO_ERROR");
        await stopping.WaitAsync(TimeSpan.FromSeconds(20));
    }

    [Fact]
    public async Task Http2_PeerWindowExhausted_StallRecordedWhenWindowReturns()
    {
        var (host, metrics) = await StartAsync();
        await using var _ = host;
        using var __ = metrics;
        var peer = await Http2TestPeer.ConnectAsync(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, host.HttpAddress.Port));
        await using var ___ = peer;
        // A 100-byte stream window: the 1,000-byte response waits for our WINDOW_UPDATE.
        await peer.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 100));
        await peer.SendRequestHeadersAsync(1, "GET", "/big");
        await peer.ExpectHeadersAsync(1);
        var first = await peer.ExpectDataAsync(1);
        Assert.Equal(100, first.AsData().Data.Length); // the writer flushed this only after the stream blocked
        Assert.Empty(metrics.Of("proxy.server.http2.flow_control.stall_duration"));

        await peer.SendWindowUpdateAsync(1, 10_000);

        var stall = await metrics.WaitAsync("proxy.server.http2.flow_control.stall_duration");
        Assert.True(stall.Value >= 0);
    }

    /// <summary>
    /// At the connection bound the gauge reports the bound, and the accept loop's pause is recorded (reason
    /// connection_limit) once an open connection ends and the waiting client is accepted.
    /// </summary>
    [Fact]
    public async Task ConnectionLimit_Reached_BoundReportedAndPauseRecordedWhenRoomReturns()
    {
        var (host, metrics) = await StartAsync(options => options.MaxConcurrentConnections = 1);
        await using var _ = host;
        using var __ = metrics;
        Assert.Equal(1, metrics.Current("proxy.server.connection_limit"));
        var limit = ((ProxyServer)host.App.Services.GetRequiredService<Microsoft.AspNetCore.Hosting.Server.IServer>()).ConnectionLimit!;
        var endPoint = new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, host.HttpAddress.Port);

        using var first = new System.Net.Sockets.Socket(System.Net.Sockets.SocketType.Stream, System.Net.Sockets.ProtocolType.Tcp);
        await first.ConnectAsync(endPoint);
        Assert.True(SpinWait.SpinUntil(() => limit.Open == 1 && limit.AcceptsWaiting >= 1, s_hangLimit), "the accept loop did not stop at the bound");
        using var second = new System.Net.Sockets.Socket(System.Net.Sockets.SocketType.Stream, System.Net.Sockets.ProtocolType.Tcp);
        await second.ConnectAsync(endPoint); // into the listen backlog
        Assert.Empty(metrics.Of("proxy.server.accept.pause_duration"));

        first.Close(); // room for one

        var pause = await metrics.WaitAsync("proxy.server.accept.pause_duration", m => m.Tag("proxy.accept.pause_reason") == "connection_limit");
        Assert.True(pause.Value >= 0);
        await second.SendAsync("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"u8.ToArray());
        var response = new byte[1024];
        var read = await second.ReceiveAsync(response.AsMemory()).AsTask().WaitAsync(s_hangLimit);
        Assert.StartsWith("HTTP/1.1 200", System.Text.Encoding.ASCII.GetString(response, 0, read));
    }

    private static async Task<Http2TestPeer> ConnectAsync(TestHost host)
    {
        var peer = await Http2TestPeer.ConnectAsync(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, host.HttpAddress.Port));
        await peer.HandshakeAsync();
        return peer;
    }
}
