using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class HeaderTests
{
    [Fact]
    public async Task RequestHeaders_HopByHop_StrippedAndOthersKept()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/");
        request.Headers.TryAddWithoutValidation("Connection", "X-Hop-Listed");
        request.Headers.TryAddWithoutValidation("X-Hop-Listed", "1");
        request.Headers.TryAddWithoutValidation("Keep-Alive", "timeout=5");
        request.Headers.TryAddWithoutValidation("Proxy-Connection", "keep-alive");
        request.Headers.TryAddWithoutValidation("TE", "trailers");
        request.Headers.TryAddWithoutValidation("X-Kept", "yes");

        var echo = await (await http.SendAsync(request)).ReadEchoAsync();

        Assert.False(echo.Headers.ContainsKey("x-hop-listed"));
        Assert.False(echo.Headers.ContainsKey("keep-alive"));
        Assert.False(echo.Headers.ContainsKey("proxy-connection"));
        Assert.Equal("trailers", echo.Headers["te"]);
        Assert.Equal("yes", echo.Headers["x-kept"]);
    }

    [Fact]
    public async Task RequestHeaders_UpgradeAndTeOtherThanTrailers_NotForwarded()
    {
        // Raw HTTP/1.1 so the client library cannot drop or rewrite the fields itself.
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var tcp = new TcpClient();
        await tcp.ConnectAsync(proxy.BaseAddress.Host, proxy.BaseAddress.Port);
        var stream = tcp.GetStream();
        var head = $"GET /raw HTTP/1.1\r\nHost: {proxy.BaseAddress.Authority}\r\nTE: gzip\r\nUpgrade: websocket-ish\r\nConnection: close\r\nX-Kept: 1\r\n\r\n";

        await stream.WriteAsync(Encoding.ASCII.GetBytes(head));
        var text = await new StreamReader(stream).ReadToEndAsync().WaitAsync(TimeSpan.FromSeconds(10));

        Assert.StartsWith("HTTP/1.1 200", text);
        Assert.Contains("\"x-kept\":\"1\"", text);
        Assert.DoesNotContain("\"te\"", text);
        Assert.DoesNotContain("\"upgrade\"", text);
        Assert.DoesNotContain("websocket-ish", text);
    }

    [Fact]
    public async Task ResponseHeaders_HopByHop_StrippedAndOthersKept()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.Headers["Keep-Alive"] = "timeout=5";
            context.Response.Headers["Proxy-Connection"] = "keep-alive";
            context.Response.Headers["X-Resp"] = "kept";
            await context.Response.WriteAsync("ok");
        }));
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.False(response.Headers.Contains("Keep-Alive"));
        Assert.False(response.Headers.Contains("Proxy-Connection"));
        Assert.Equal("kept", response.Headers.GetValues("X-Resp").Single());
    }

    [Fact]
    public async Task XForwarded_Default_SetFromClientConnection()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/");
        request.Headers.TryAddWithoutValidation("X-Forwarded-For", "10.9.9.9");

        var echo = await (await http.SendAsync(request)).ReadEchoAsync();

        // Set (YARP's default): the client's claim is replaced, not trusted.
        Assert.Equal("127.0.0.1", echo.Headers["x-forwarded-for"]);
        Assert.Equal("http", echo.Headers["x-forwarded-proto"]);
        Assert.Equal(proxy.BaseAddress.Authority, echo.Headers["x-forwarded-host"]);
    }

    [Fact]
    public async Task Host_Default_DestinationHostNotOriginal()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/");
        request.Headers.Host = "original.example";

        var echo = await (await http.SendAsync(request)).ReadEchoAsync();

        Assert.Equal(backend.BaseAddress.Authority, echo.Headers["host"]);
        Assert.Equal("original.example", echo.Headers["x-forwarded-host"]);
    }
}
