using System.Net;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Transport.InMemory;

namespace Proxy.Server.Tests;

public class KeepAliveConnectionFeatureResetTests
{
    [Fact]
    public async Task KeepAlive_NonIpLocalEndPoint_ConnectionAddressesSetByOneRequest_DoNotLeakIntoTheNext()
    {
        // On a listener whose local end point is not an IPEndPoint (a Unix socket, say), the reused features
        // must still forget what one request's middleware wrote into IHttpConnectionFeature.
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseProxyServer(options => options.AddServerHeader = false);
        await using var app = builder.Build();
        var seen = new List<string>();
        app.Run(async context =>
        {
            seen.Add($"{context.Connection.LocalIpAddress?.ToString() ?? "-"}:{context.Connection.LocalPort}");
            context.Connection.LocalIpAddress = IPAddress.Parse("192.0.2.9");
            context.Connection.LocalPort = 1234;
            await context.Response.WriteAsync("[ok]");
        });
        var server = (ProxyServer)app.Services.GetRequiredService<IServer>();
        var local = new UnixDomainSocketEndPoint("/tmp/review1-probe.sock");
        await using var memory = new InMemoryConnectionListener(local);
        server.AddListener(memory, new ListenOptions(new IPEndPoint(IPAddress.Loopback, 80)));
        await app.StartAsync();

        var client = await memory.ConnectAsync();
        for (var i = 0; i < 2; i++)
        {
            await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\nHost: h\r\n\r\n"u8.ToArray());
            var text = new StringBuilder();
            while (!text.ToString().Contains("[ok]"))
            {
                var result = await client.Transport.Input.ReadAsync().AsTask().WaitAsync(Patience.Long);
                foreach (var segment in result.Buffer) text.Append(Encoding.ASCII.GetString(segment.Span));
                client.Transport.Input.AdvanceTo(result.Buffer.End);
                Assert.False(result.IsCompleted);
            }
        }
        await app.StopAsync();

        Assert.Equal(["-:0", "-:0"], seen);
    }
}
