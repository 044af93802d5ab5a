using System.Text;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

public class Http2ResponseTests
{
    [Fact]
    public async Task GET_WithResponseBody_HeadersThenDataEndStream()
    {
        await using var peer = await Http2TestPeer.StartAsync(async exchange =>
        {
            Assert.Equal("GET", exchange.Method);
            Assert.Equal("/hello?x=1", exchange.RawTarget);
            Assert.Equal("localhost", exchange.Authority);
            Assert.Equal("http", exchange.Scheme);
            Assert.Equal("HTTP/2", exchange.Protocol);
            Assert.False(exchange.RequestHasBody);
            exchange.ResponseHeaders.Add("Content-Type", "text/plain");
            await exchange.ResponseBody.WriteAsync(Encoding.UTF8.GetBytes("hello world"));
        });
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, path: "/hello?x=1");

        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Status);
        Assert.Equal("text/plain", response.Headers["content-type"]);
        Assert.Equal("hello world", response.BodyText);
        Assert.Null(response.Trailers);
    }

    [Fact]
    public async Task Handshake_ServerSettings_AdvertiseLimitsAndRaiseConnectionWindow()
    {
        var options = new Http2Options { MaxConcurrentStreams = 7, InitialStreamWindowSize = 12345, InitialConnectionWindowSize = 1 << 20 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.SendPrefaceAndSettingsAsync();

        var settings = await peer.ExpectSettingsAsync();
        var update = await peer.ReceiveFrameAsync();

        Assert.Contains(new Http2Setting(Http2SettingsParameter.MaxConcurrentStreams, 7), settings);
        Assert.Contains(new Http2Setting(Http2SettingsParameter.InitialWindowSize, 12345), settings);
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.MaxFrameSize);
        Assert.Contains(settings, s => s.Parameter == Http2SettingsParameter.MaxHeaderListSize);
        Assert.Equal(Http2FrameType.WindowUpdate, update.Type);
        Assert.Equal(0, update.StreamId);
        Assert.Equal((1 << 20) - 65535, update.AsWindowUpdate().WindowSizeIncrement);
        await peer.SendSettingsAckAsync();
        await peer.ExpectSettingsAckAsync();
    }
}
