using System.Net;
using System.Text;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Server.Internal;
using Proxy.Transport.InMemory;

namespace Proxy.Server.Tests;

/// <summary>The real HTTP/1.1 engine behind the server seam, over the in-memory transport.</summary>
public class Http1WiringTests
{
    private static async Task<string> ReadUntilAsync(InMemoryConnection client, string marker)
    {
        var text = new StringBuilder();
        while (!text.ToString().Contains(marker, StringComparison.Ordinal))
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
}
