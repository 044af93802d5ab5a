using System.Net;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Server.Internal;
using Proxy.Transport.InMemory;

namespace Proxy.Server.Tests;

/// <summary>The real HTTP/1.1 engine behind the server seam, over the in-memory transport.</summary>
public class Http1WiringTests
{
    private static async Task<string> ReadUntilAsync(InMemoryConnection client, string marker)
    {
        // NOTE: a chunked response ends with its last chunk ("0\r\n\r\n"), which may come in a later write than the
        // marker in the body: read it too, or the next response read starts with it.
        var text = new StringBuilder();
        while (!IsComplete(text.ToString()))
        {
            var result = await client.Transport.Input.ReadAsync().AsTask().WaitAsync(Patience.Long);
            foreach (var segment in result.Buffer)
            {
                text.Append(Encoding.ASCII.GetString(segment.Span));
            }
            client.Transport.Input.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                break;
            }
        }
        return text.ToString();

        bool IsComplete(string received) =>
            received.Contains(marker, StringComparison.Ordinal)
            && (!received.Contains("Transfer-Encoding: chunked", StringComparison.OrdinalIgnoreCase) || received.EndsWith("0\r\n\r\n", StringComparison.Ordinal));
    }

    [Fact]
    public async Task Request_RealHttp1Engine_AppAnswersAndIdleConnectionClosesOnStop()
    {
        var server = new ProxyServer(new ProxyServerOptions(), NullLoggerFactory.Instance, TimeProvider.System, EngineProtocolFactory.Instance);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        var app = new DelegateApplication(context => context.Response.WriteAsync("path=" + context.Request.Path.Value));
        await server.StartAsync(app, CancellationToken.None);

        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET /x%20y HTTP/1.1\r\nHost: a\r\n\r\n"u8.ToArray());
        var response = await ReadUntilAsync(client, "path=/x y");
        Assert.StartsWith("HTTP/1.1 200", response);
        Assert.Contains("Server: proxy", response);

        // Idle keep-alive connection: stop closes it at once instead of waiting for the host's timeout.
        await server.StopAsync(CancellationToken.None).WaitAsync(Patience.Long);
        var end = await client.Transport.Input.ReadAsync().AsTask().WaitAsync(Patience.Long);
        Assert.True(end.IsCompleted);
    }

    [Fact]
    public async Task EmptyResponse_AppWritesNothing_ContentLengthZeroNotChunked()
    {
        var server = new ProxyServer(new ProxyServerOptions(), NullLoggerFactory.Instance, TimeProvider.System, EngineProtocolFactory.Instance);
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await server.StartAsync(new DelegateApplication(context =>
        {
            context.Response.StatusCode = 202;
            return Task.CompletedTask;
        }), CancellationToken.None);

        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\nHost: a\r\n\r\n"u8.ToArray());
        var response = await ReadUntilAsync(client, "\r\n\r\n");

        // The completion frames the empty body (the head was not committed to chunked before it).
        Assert.StartsWith("HTTP/1.1 202", response);
        Assert.Contains("Content-Length: 0\r\n", response);
        Assert.DoesNotContain("Transfer-Encoding", response);
        await server.StopAsync(CancellationToken.None).WaitAsync(Patience.Long);
    }

    private interface IMarkerFeature;

    private sealed class MarkerFeature : IMarkerFeature;

    [Fact]
    public async Task KeepAlive_WebApplication_EachRequestStartsClean()
    {
        // A real host (HostingApplication reuses its HttpContext through our features on one connection):
        // whatever one request's app changed must be gone in the next.
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseProxyServer(options => options.AddServerHeader = false);
        await using var app = builder.Build();
        var seen = new List<string>();
        var contexts = new List<HttpContext>();
        app.Run(async context =>
        {
            var request = context.Request;
            var connection = context.Connection;
            var features = context.Features;
            seen.Add($"{request.Method} {request.PathBase}|{request.Path}|{request.QueryString} h={string.Join(",", request.Headers.Keys.Order())} " +
                $"items={context.Items.Count} marker={features.Get<IMarkerFeature>() is not null} remote={connection.RemoteIpAddress} " +
                $"max={features.Get<IHttpMaxRequestBodySizeFeature>()!.MaxRequestBodySize} status={context.Response.StatusCode} " +
                $"rh={context.Response.Headers.Count} started={context.Response.HasStarted} aborted={context.RequestAborted.IsCancellationRequested}");
            contexts.Add(context);
            if (request.Path == "/first")
            {
                // What an app and its middleware leave behind (the limit can only change before reading).
                features.Get<IHttpMaxRequestBodySizeFeature>()!.MaxRequestBodySize = 1;
            }
            var body = await new StreamReader(request.Body).ReadToEndAsync();
            if (request.Path == "/first")
            {
                context.Items["k"] = "v";
                features.Set<IMarkerFeature>(new MarkerFeature());
                request.PathBase = "/base";
                connection.RemoteIpAddress = IPAddress.Parse("192.0.2.7");
                context.Response.StatusCode = 201;
                context.Response.Headers["X-First"] = "1";
                context.Response.OnCompleted(() => { seen.Add("completed-first"); return Task.CompletedTask; });
            }
            await context.Response.WriteAsync($"[{body}]");
        });
        var server = (ProxyServer)app.Services.GetRequiredService<IServer>();
        await using var memory = new InMemoryConnectionListener();
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await app.StartAsync();

        var client = await memory.ConnectAsync();
        await client.Transport.Output.WriteAsync("GET /first?a=1 HTTP/1.1\r\nHost: h\r\nX-One: 1\r\n\r\n"u8.ToArray());
        var first = await ReadUntilAsync(client, "[]");
        await client.Transport.Output.WriteAsync("POST /second?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"u8.ToArray());
        var second = await ReadUntilAsync(client, "[abc]");
        await client.Transport.Output.WriteAsync("GET /second?a=1 HTTP/1.1\r\nHost: h\r\n\r\n"u8.ToArray());
        var third = await ReadUntilAsync(client, "[]");
        await app.StopAsync();

        Assert.StartsWith("HTTP/1.1 201", first);
        Assert.Contains("X-First: 1", first);
        Assert.StartsWith("HTTP/1.1 200", second);
        Assert.DoesNotContain("X-First", second);
        Assert.StartsWith("HTTP/1.1 200", third);
        Assert.Equal(
        [
            "GET |/first|?a=1 h=Host,X-One items=0 marker=False remote=127.0.0.1 max=30000000 status=200 rh=0 started=False aborted=False",
            "completed-first",
            "POST |/second|?a=1 h=Content-Length,Host items=0 marker=False remote=127.0.0.1 max=30000000 status=200 rh=0 started=False aborted=False",
            "GET |/second|?a=1 h=Host items=0 marker=False remote=127.0.0.1 max=30000000 status=200 rh=0 started=False aborted=False",
        ], seen);
        Assert.Equal(3, contexts.Count);
    }
}
