using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class ForwardingTests
{
    [Theory]
    [InlineData(TestProtocol.Http1, false, "HTTP/1.1")]
    [InlineData(TestProtocol.Http1, true, "HTTP/2")]
    [InlineData(TestProtocol.Http2, false, "HTTP/1.1")]
    [InlineData(TestProtocol.Http2, true, "HTTP/2")]
    public async Task Get_ThroughProxy_ReachesBackendWithPathQueryAndExpectedProtocol(TestProtocol client, bool h2cBackend, string backendProtocol)
    {
        await using var backend = await Backends.StartEchoAsync(h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await Proxies.StartForAsync(backend, client, h2cBackend);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/a/b%20c?x=1&y=2");
        var echo = await response.ReadEchoAsync();

        Assert.Equal("GET", echo.Method);
        Assert.Equal("/a/b c", echo.Path);
        Assert.Equal("?x=1&y=2", echo.Query);
        Assert.Equal(backendProtocol, echo.Protocol);
        Assert.Equal("echo", response.Headers.GetValues("x-backend").Single());
    }

    [Theory]
    [InlineData(TestProtocol.Http1, false)]
    [InlineData(TestProtocol.Http2, true)]
    public async Task Post_WithBody_BodyAndContentHeadersForwarded(TestProtocol client, bool h2cBackend)
    {
        await using var backend = await Backends.StartEchoAsync(h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await Proxies.StartForAsync(backend, client, h2cBackend);
        using var http = proxy.CreateClient();

        using var response = await http.PostAsync("/submit", new StringContent("hello backend", System.Text.Encoding.UTF8, "text/plain"));
        var echo = await response.ReadEchoAsync();

        Assert.Equal("POST", echo.Method);
        Assert.Equal("hello backend", echo.Body);
        Assert.StartsWith("text/plain", echo.Headers["content-type"]);
    }

    [Fact]
    public async Task Get_WithoutBody_NoContentHeadersSent()
    {
        await using var backend = await Backends.StartEchoAsync(TestProtocol.Http2);
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true);
        using var http = proxy.CreateClient();

        var echo = await (await http.GetAsync("/")).ReadEchoAsync();

        Assert.False(echo.Headers.ContainsKey("content-length"));
        Assert.False(echo.Headers.ContainsKey("content-type"));
    }

    [Theory]
    [InlineData(TestProtocol.Http1, false)]
    [InlineData(TestProtocol.Http2, true)]
    [InlineData(TestProtocol.Http1, true)]
    public async Task LargeBodies_BothWays_ArriveIntact(TestProtocol client, bool h2cBackend)
    {
        const int size = 8 * 1024 * 1024 + 123;
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            // Hash the upload while streaming it, then send a large deterministic download.
            using var hash = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
            var buffer = new byte[32 * 1024];
            long total = 0;
            int read;
            while ((read = await context.Request.Body.ReadAsync(buffer)) > 0)
            {
                hash.AppendData(buffer, 0, read);
                total += read;
            }

            context.Response.Headers["x-upload-sha256"] = Convert.ToHexString(hash.GetHashAndReset());
            context.Response.Headers["x-upload-length"] = total.ToString();
            context.Response.ContentLength = size;
            await context.Response.Body.WriteAsync(Pattern(size));
        }), h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await Proxies.StartForAsync(backend, client, h2cBackend);
        using var http = proxy.CreateClient();
        var upload = Pattern(size + 7);

        using var response = await http.PostAsync("/big", new ByteArrayContent(upload));
        var download = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal((size + 7).ToString(), response.Headers.GetValues("x-upload-length").Single());
        Assert.Equal(Convert.ToHexString(SHA256.HashData(upload)), response.Headers.GetValues("x-upload-sha256").Single());
        Assert.Equal(size, download.Length);
        Assert.True(Pattern(size).AsSpan().SequenceEqual(download));
    }

    [Fact]
    public async Task ChunkedUpload_UnknownLength_StreamedToBackend()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();
        var content = new StreamContent(new MemoryStream(System.Text.Encoding.UTF8.GetBytes("chunked body")));
        using var request = new HttpRequestMessage(HttpMethod.Put, "/u") { Content = content };
        request.Headers.TransferEncodingChunked = true;

        var echo = await (await http.SendAsync(request)).ReadEchoAsync();

        Assert.Equal("PUT", echo.Method);
        Assert.Equal("chunked body", echo.Body);
    }

    [Fact]
    public async Task StatusAndBody_NonSuccessFromBackend_PassedThroughUnchanged()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.StatusCode = 418;
            await context.Response.WriteAsync("teapot");
        }));
        await using var proxy = await Proxies.StartForAsync(backend);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.Equal((HttpStatusCode)418, response.StatusCode);
        Assert.Equal("teapot", await response.Content.ReadAsStringAsync());
    }

    internal static byte[] Pattern(int size)
    {
        var data = new byte[size];
        for (var i = 0; i < size; i++)
        {
            data[i] = (byte)(i * 31 + (i >> 11));
        }

        return data;
    }

    [Fact]
    public async Task Post_ExpectContinue_BodySentOnlyAfter100Continue_ReachesBackendWhole()
    {
        // Raw HTTP/1.1: the client holds its declared body until the proxy asks for it (100 Continue), so the proxy must
        // wait for the body it has not got rather than take what is there at once.
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var tcp = new TcpClient();
        await tcp.ConnectAsync(proxy.BaseAddress.Host, proxy.BaseAddress.Port);
        var stream = tcp.GetStream();
        var head = $"POST /upload HTTP/1.1\r\nHost: {proxy.BaseAddress.Authority}\r\nContent-Length: 11\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
        await stream.WriteAsync(Encoding.ASCII.GetBytes(head));

        var interim = new StringBuilder();
        var one = new byte[1];
        while (!interim.ToString().EndsWith("\r\n\r\n", StringComparison.Ordinal))
        {
            Assert.Equal(1, await stream.ReadAsync(one).AsTask().WaitAsync(TimeSpan.FromSeconds(10)));
            interim.Append((char)one[0]);
        }
        Assert.StartsWith("HTTP/1.1 100", interim.ToString());

        await stream.WriteAsync(Encoding.ASCII.GetBytes("hello world"));
        var text = await new StreamReader(stream).ReadToEndAsync().WaitAsync(TimeSpan.FromSeconds(10));

        Assert.StartsWith("HTTP/1.1 200", text);
        Assert.Contains("\"body\":\"hello world\"", text, StringComparison.OrdinalIgnoreCase);
    }
}
