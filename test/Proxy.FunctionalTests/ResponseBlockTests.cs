using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Proxy.FunctionalTests.Hosting;
using Proxy.Protocols.Http2;
using Proxy.Server;
using Proxy.Testing;

namespace Proxy.FunctionalTests;

/// <summary>How our server's HTTP/2 response pipes take an app's bytes, counted by the pool behind them (HttpClient, h2c).</summary>
public sealed class ResponseBlockTests
{
    [Fact]
    public async Task BodyWrittenBeforeTheStart_MovedInTheExchangesLargeBlocks()
    {
        // 40 KiB written and not flushed: the server holds it until the response starts (here at the app's return), then
        // moves it to the stream's pipe. Asked for by what is left that is 16 + 16 + 4 + 4 KiB; asked for with no size
        // hint (BuffersExtensions.Write) it was 40 blocks of 1 KiB.
        var pool = new CountingMemoryPool(maxBufferSize: 16 * 1024);
        var body = new byte[40 * 1024];
        Random.Shared.NextBytes(body);
        await using var host = await TestHost.StartAsync(ServerKind.ProxyServer, app => app.MapGet("/body", (HttpContext context) =>
        {
            var writer = context.Response.BodyWriter;
            body.CopyTo(writer.GetSpan(body.Length));
            writer.Advance(body.Length);
            return Task.CompletedTask;
        }), https: false, configureServices: services => services.Configure<ProxyServerOptions>(options =>
            options.Http2 = new Http2Options { StreamMemoryPool = pool, StreamMinimumSegmentSize = 256 }));
        using var client = TestClients.Create(host, HttpTransport.Http2Cleartext);

        var received = await client.GetByteArrayAsync("/body");

        Assert.Equal(body, received);
        Assert.Equal(body.Length, pool.RentedBytes);
        Assert.Equal(4, pool.Rents);
    }
}
