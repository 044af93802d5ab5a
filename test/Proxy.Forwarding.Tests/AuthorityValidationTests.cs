using System.Collections.Concurrent;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// The authority a request is served for is the one forwarded: requests whose Host or target carries userinfo, or whose
/// Host names another authority than their absolute-form target, are refused with 400 by the host server or by the
/// forwarder's own check, and never reach the backend. Raw HTTP/1.1, so no client library fixes the request first.
/// </summary>
public class AuthorityValidationTests
{
    [Theory]
    // RFC 9112 §3.2.2: the absolute-form target names the authority; a different Host must not become Request.Host.
    [InlineData("GET http://served.example{0} HTTP/1.1\r\nHost: evil.example\r\n")]
    [InlineData("GET http://served.example:8080{0} HTTP/1.1\r\nHost: served.example\r\n")]
    // RFC 9110 §4.2.4: userinfo is an error, in a target (Kestrel drops it from the authority, the forwarder sees it
    // in RawTarget) or in Host.
    [InlineData("GET http://user@served.example{0} HTTP/1.1\r\nHost: served.example\r\n")]
    [InlineData("GET {0} HTTP/1.1\r\nHost: user@served.example\r\n")]
    [InlineData("GET {0} HTTP/1.1\r\nHost: user:secret@served.example:80\r\n")]
    public async Task Http11BadAuthority_400_BackendSeesNothing(string head)
    {
        var seen = new ConcurrentQueue<string>();
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            seen.Enqueue(context.Request.Path.Value ?? "");
            await context.Response.WriteAsync("reached");
        }));
        await using var proxy = await Proxies.StartForAsync(backend);
        var id = "/bad/" + Guid.NewGuid().ToString("N");

        var answer = await SendRawAsync(proxy, string.Format(System.Globalization.CultureInfo.InvariantCulture, head, id) + "Connection: close\r\n\r\n");

        Assert.StartsWith("HTTP/1.1 400", answer);
        // The route works: a well-formed request sent afterwards reaches the backend, and it alone did.
        using var http = proxy.CreateClient();
        Assert.Equal("reached", await http.GetStringAsync("/good"));
        Assert.Equal(["/good"], seen.ToArray());
    }

    [Fact]
    public async Task Http11AbsoluteFormTarget_ForwardedHostIsTheTargetAuthority()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);

        var answer = await SendRawAsync(proxy, "GET http://SERVED.example/a HTTP/1.1\r\nHost: served.example:80\r\nConnection: close\r\n\r\n");

        Assert.StartsWith("HTTP/1.1 200", answer);
        Assert.Contains("\"path\":\"/a\"", answer, StringComparison.OrdinalIgnoreCase);
        Assert.Contains("\"x-forwarded-host\":\"served.example:80\"", answer, StringComparison.Ordinal);
    }

    private static async Task<string> SendRawAsync(TestApp proxy, string request)
    {
        using var tcp = new TcpClient();
        await tcp.ConnectAsync(proxy.BaseAddress.Host, proxy.BaseAddress.Port);
        var stream = tcp.GetStream();
        await stream.WriteAsync(Encoding.ASCII.GetBytes(request));
        return await new StreamReader(stream).ReadToEndAsync().WaitAsync(TimeSpan.FromSeconds(10));
    }
}
