using System.Buffers;
using System.Text;
using Proxy.Transport.InMemory;

namespace Proxy.Transport.Tests;

public class InMemoryTransportTests
{
    [Fact]
    public async Task ConnectAsync_AcceptYieldsServerSide_BytesFlowBothWays()
    {
        await using var listener = new InMemoryConnectionListener();
        var client = await listener.ConnectAsync();
        var server = (await listener.AcceptAsync())!;
        Assert.Same(client.ServerConnection, server);

        await client.Transport.Output.WriteAsync("hello"u8.ToArray());
        var read = await server.Transport.Input.ReadAtLeastAsync(5);
        Assert.Equal("hello", Encoding.ASCII.GetString(read.Buffer));
        server.Transport.Input.AdvanceTo(read.Buffer.End);

        await server.Transport.Output.WriteAsync("world"u8.ToArray());
        Assert.Equal("world", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(client.Stream, 5)));
    }

    [Fact]
    public async Task ClientDispose_ServerReadsEndOfStream()
    {
        await using var listener = new InMemoryConnectionListener();
        var client = await listener.ConnectAsync();
        var server = (await listener.AcceptAsync())!;
        await client.DisposeAsync();
        var result = await server.Transport.Input.ReadAsync();
        Assert.True(result.IsCompleted);
    }

    [Fact]
    public async Task Unbind_AcceptReturnsNull()
    {
        var listener = new InMemoryConnectionListener();
        await listener.UnbindAsync();
        Assert.Null(await listener.AcceptAsync());
    }
}
