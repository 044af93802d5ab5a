using System.Buffers;
using System.Net;
using System.Net.Sockets;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Proxy.Codecs.Http2;
using Proxy.Forwarding;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// Flow control coupled end to end through the native relay: a backend may only get as far ahead of a slow client as
/// the proxy's windows and buffers allow (about the backend stream window plus one stream output buffer), never the
/// whole body. Both ends are scripted HTTP/2 peers over real sockets, so every byte of credit is counted.
/// </summary>
public sealed class RelayFlowControlTests
{
    private const int Chunk = 16_384;
    private const long Total = 16 * 1024 * 1024;
    // What the proxy may hold for one relayed stream: the backend stream window it grants (768 KiB), the client
    // stream's output buffer (64 KiB) and frames in flight; well below the 16 MiB body.
    private const long Bound = 1152 * 1024;

    [Theory]
    [InlineData(false)]
    [InlineData(true)] // the direct path lends the backend's bytes to the client's writer loop instead of copying them
    public async Task SlowClient_BackendNeverFurtherAheadThanTheProxysWindows(bool directPath)
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        await using var proxy = await StartProxyAsync(((IPEndPoint)listener.LocalEndpoint).Port, directPath);

        // The client: a 16 KiB window it refills only when the backend reports it is stalled (a reader slower than anything).
        await using var client = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, proxy.H2cAddress.Port));
        client.MaxFrameSize = 16_384;
        await client.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, Chunk));
        await client.SendRequestHeadersAsync(1, "GET", "/download");

        using var accepted = await listener.AcceptSocketAsync().WaitAsync(TimeSpan.FromSeconds(20));
        await using var backend = Http2TestPeer.Over(accepted);
        var proxySettings = await backend.AcceptHandshakeAsync();
        long window = proxySettings.FirstOrDefault(s => s.Parameter == Http2SettingsParameter.InitialWindowSize).Value is var v and > 0 ? v : 65_535;
        var request = await backend.ExpectHeadersAsync(1);
        // The proxy raises its connection window right after its SETTINGS (RFC 9113 §6.9.2); waiting for HEADERS skipped that frame.
        long connectionWindow = 65_535 + backend.SkippedWindowUpdates.Where(f => f.StreamId == 0).Sum(f => (long)f.AsWindowUpdate().WindowSizeIncrement);
        Assert.Equal("/download", request[":path"]);
        await backend.SendResponseHeadersAsync(1, 200, endStream: false);

        // The client reads every DATA frame it is sent, but grants credit only when the backend reports a stall.
        long received = 0;
        var progress = new SemaphoreSlim(0);
        var reader = Task.Run(async () =>
        {
            while (true)
            {
                var frame = await client.ReceiveSkippingWindowUpdatesAsync();
                if (frame.Type == Http2FrameType.Data && frame.StreamId == 1)
                {
                    Interlocked.Add(ref received, frame.Payload.Length);
                    progress.Release();
                    if (frame.EndStream)
                    {
                        return;
                    }
                }
            }
        });

        long sent = 0;
        long granted = Chunk; // the client's initial window
        var stalls = 0;
        long largestGap = 0;
        var payload = new byte[Chunk];
        Task<Http2TestFrame>? nextFrame = null;
        Task? progressWait = null;
        while (sent < Total)
        {
            var allowed = Math.Min(Math.Min(window, connectionWindow), Math.Min(Chunk, Total - sent));
            if (allowed > 0)
            {
                await backend.SendDataAsync(1, payload.AsMemory(0, (int)allowed), endStream: sent + allowed == Total);
                sent += allowed;
                window -= allowed;
                connectionWindow -= allowed;
                continue;
            }

            // Stalled: the proxy gives no more credit. Everything sent is with the client or inside the proxy.
            stalls++;
            var gap = sent - Interlocked.Read(ref received);
            largestGap = Math.Max(largestGap, gap);
            Assert.True(gap <= Bound, $"The backend got {gap} bytes ahead of the client (bound {Bound}).");

            // Until credit comes back, the client reads a little more at a time: 64 KiB per grant.
            // The client's own window stays small (at most 80 KiB open), so little is in flight towards it.
            nextFrame ??= backend.ReceiveFrameAsync();
            while (!nextFrame.IsCompleted)
            {
                if (granted - Interlocked.Read(ref received) < Chunk)
                {
                    await client.SendWindowUpdateAsync(1, Chunk * 4);
                    await client.SendWindowUpdateAsync(0, Chunk * 4);
                    granted += Chunk * 4;
                }
                progressWait ??= progress.WaitAsync();
                await Task.WhenAny(nextFrame, progressWait);
                if (progressWait.IsCompleted)
                {
                    progressWait = null; // one waiter at a time: a forgotten one would swallow a later signal
                }
            }

            Http2TestFrame frame;
            try
            {
                frame = await nextFrame;
            }
            catch (TimeoutException ex)
            {
                throw new TimeoutException($"No credit for the backend: sent {sent}, client received {Interlocked.Read(ref received)}, stalls {stalls}, client frames: {string.Join(", ", client.ReceivedFrames.TakeLast(5))}", ex);
            }
            nextFrame = null;
            if (frame.Type == Http2FrameType.WindowUpdate)
            {
                if (frame.StreamId == 1)
                {
                    window += frame.AsWindowUpdate().WindowSizeIncrement;
                }
                else if (frame.StreamId == 0)
                {
                    connectionWindow += frame.AsWindowUpdate().WindowSizeIncrement;
                }
            }
        }

        // The rest drains once the client reads freely.
        for (var i = 0; i < Total / (Chunk * 4) + 2 && !reader.IsCompleted; i++)
        {
            await client.SendWindowUpdateAsync(1, Chunk * 4);
            await client.SendWindowUpdateAsync(0, Chunk * 4);
        }
        await reader.WaitAsync(TimeSpan.FromSeconds(30));
        Assert.Equal(Total, Interlocked.Read(ref received));
        Assert.True(stalls > 10, $"The backend stalled only {stalls} times: the proxy granted credit the client never gave.");
        Assert.True(largestGap > 768 * 1024 / 2, $"The largest gap, {largestGap} bytes, is below half the backend stream window: the test did not fill the proxy.");
    }

    [Theory]
    [InlineData(false)] // the pipeline lends too: the relay knows our server's exchange behind the HttpContext
    [InlineData(true)]
    public async Task ClientResetsWhileTheBackendsBytesAreLent_BackendStreamCancelledAndTheClientConnectionCarriesOn(bool directPath)
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        await using var proxy = await StartProxyAsync(((IPEndPoint)listener.LocalEndpoint).Port, directPath);

        // The client's stream window is 1,000 bytes: the proxy's writer stops inside the first 64 KiB it was lent.
        await using var client = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, proxy.H2cAddress.Port));
        await client.HandshakeAsync(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 1000));
        await client.SendRequestHeadersAsync(1, "GET", "/download");

        using var accepted = await listener.AcceptSocketAsync().WaitAsync(TimeSpan.FromSeconds(20));
        await using var backend = Http2TestPeer.Over(accepted);
        await backend.AcceptHandshakeAsync();
        await backend.ExpectHeadersAsync(1);
        await backend.SendResponseHeadersAsync(1, 200, endStream: false);
        var payload = new byte[16_384];
        new Random(3).NextBytes(payload);
        for (var i = 0; i < 4; i++)
        {
            await backend.SendDataAsync(1, payload, endStream: false); // 64 KiB, within the proxy's backend windows
        }

        await client.ExpectHeadersAsync(1);
        var first = (await client.ExpectDataAsync(1)).AsData();
        Assert.Equal(payload.AsSpan(0, 1000).ToArray(), first.Data.ToArray());

        await client.SendRstStreamAsync(1, Http2ErrorCode.Cancel);

        // The relay gets its lent bytes back at once and cancels the backend's stream.
        await backend.ExpectRstStreamAsync(1, Http2ErrorCode.Cancel);

        // The client's connection carries on (a PING is answered; frames of stream 1 that left before the reset arrived
        // may come first).
        await client.SendPingAsync(0x1234);
        while (true)
        {
            var frame = await client.ReceiveSkippingWindowUpdatesAsync();
            Assert.NotEqual(Http2FrameType.GoAway, frame.Type);
            if (frame.Type == Http2FrameType.Ping)
            {
                Assert.True(frame.AsPing().IsAck);
                Assert.Equal(0x1234ul, frame.AsPing().OpaqueData);
                break;
            }
        }
    }

    /// <summary>
    /// The pipeline lends to our server's exchange only while the response body is the server's own: middleware that
    /// replaced it (compression, byte counts) must see every byte. On Kestrel there is no exchange to lend to.
    /// </summary>
    [Theory]
    [InlineData(ServerKind.ProxyServer, "/plain", "exchange")]
    [InlineData(ServerKind.ProxyServer, "/wrapped", "none")]
    [InlineData(ServerKind.Kestrel, "/plain", "none")]
    public async Task ClientExchangeOf_TheServersOwnResponseBodyOnly(ServerKind server, string path, string expected)
    {
        await using var host = await TestHost.StartAsync(server, app =>
        {
            app.Use(async (context, next) =>
            {
                if (context.Request.Path == "/wrapped")
                {
                    var inner = context.Features.Get<Microsoft.AspNetCore.Http.Features.IHttpResponseBodyFeature>()!;
                    context.Features.Set<Microsoft.AspNetCore.Http.Features.IHttpResponseBodyFeature>(
                        new StreamResponseBodyFeature(inner.Stream, inner));
                }
                await next(context);
            });
            app.MapGet("/{name}", (Microsoft.AspNetCore.Http.HttpContext context) =>
                Proxy.Relay.NativeClusterTransport.ClientExchangeOf(context) is null ? "none" : "exchange");
        }, https: false);
        using var client = new HttpClient { BaseAddress = host.HttpAddress };

        Assert.Equal(expected, await client.GetStringAsync(path));
    }

    /// <summary>Our proxy on our server with one route to an h2c backend at <paramref name="backendPort"/>, over the native relay.</summary>
    private static Task<TestHost> StartProxyAsync(int backendPort, bool directPath)
    {
        var keys = new Dictionary<string, string?>
        {
            ["ReverseProxy:Routes:r:ClusterId"] = "c",
            ["ReverseProxy:Routes:r:Match:Path"] = "/{**rest}",
            ["ReverseProxy:Clusters:c:Destinations:d:Address"] = $"http://127.0.0.1:{backendPort}/",
            ["ReverseProxy:Clusters:c:HttpRequest:Version"] = "2",
            ["ReverseProxy:Clusters:c:HttpRequest:VersionPolicy"] = "RequestVersionExact",
        };
        return TestHost.StartAsync(ServerKind.ProxyServer, app => app.MapProxyForwarding(), https: false, configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(keys);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            if (directPath)
            {
                Proxy.Relay.NativeRelayExtensions.AddDirectPath(b.Services);
            }
        });
    }
}
