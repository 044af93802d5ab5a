using System.Buffers;
using System.Net;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Connections;
using Proxy.Transport.Sockets;

namespace Proxy.Transport.Tests;

public class SocketTransportTests
{
    [Fact]
    public async Task Bind_PortZero_ReportsRealPort()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var port = ((IPEndPoint)listener.EndPoint).Port;
        Assert.NotEqual(0, port);
        using var client = await Net.ConnectAsync(listener.EndPoint);
        Assert.True(client.Connected);
    }

    [Fact]
    public async Task Bind_PortInUse_ThrowsAddressInUse()
    {
        await using var first = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        Assert.Throws<AddressInUseException>(() => SocketConnectionListener.Bind((IPEndPoint)first.EndPoint));
    }

    [Fact]
    public async Task Accept_Echo_BytesRoundTripAndNoDelaySet()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        Assert.NotNull(connection.RemoteEndPoint);
        Assert.Equal(((IPEndPoint)listener.EndPoint).Port, ((IPEndPoint)connection.LocalEndPoint!).Port);

        await client.SendAsync("ping"u8.ToArray());
        var result = await connection.Transport.Input.ReadAtLeastAsync(4).AsTask().WaitAsync(Net.Patience);
        Assert.Equal("ping", Encoding.ASCII.GetString(result.Buffer.Slice(0, 4)));
        connection.Transport.Input.AdvanceTo(result.Buffer.GetPosition(4));

        await connection.Transport.Output.WriteAsync("pong"u8.ToArray());
        using var stream = new NetworkStream(client);
        Assert.Equal("pong", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(stream, 4).WaitAsync(Net.Patience)));
        await connection.DisposeAsync();
    }

    [Fact]
    public async Task PeerClosesSend_InputCompletes()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        client.Shutdown(SocketShutdown.Send);

        var result = await connection.Transport.Input.ReadAsync().AsTask().WaitAsync(Net.Patience);
        Assert.True(result.IsCompleted);
        Assert.True(result.Buffer.IsEmpty);
        await connection.DisposeAsync();
    }

    [Fact]
    public async Task OutputCompleted_PeerSeesEndOfStreamAfterData()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var payload = new byte[300_000];
        Random.Shared.NextBytes(payload);
        await connection.Transport.Output.WriteAsync(payload);
        await connection.Transport.Output.CompleteAsync();

        using var stream = new NetworkStream(client);
        var received = new MemoryStream();
        await stream.CopyToAsync(received).WaitAsync(Net.Patience);
        Assert.Equal(payload, received.ToArray());
        await connection.DisposeAsync();
    }

    [Fact]
    public async Task Abort_FailsPendingReadAndClosesPeer()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var closed = new TaskCompletionSource();
        connection.ConnectionClosed.Register(() => closed.TrySetResult());

        var pending = connection.Transport.Input.ReadAsync().AsTask();
        connection.Abort(new ConnectionAbortedException("test"));

        await Assert.ThrowsAnyAsync<Exception>(() => pending.WaitAsync(Net.Patience));
        await closed.Task.WaitAsync(Net.Patience);
        var buffer = new byte[16];
        int read;
        try
        {
            read = await client.ReceiveAsync(buffer).WaitAsync(Net.Patience);
        }
        catch (SocketException)
        {
            read = 0; // Reset is as good as FIN here.
        }
        Assert.Equal(0, read);
        await connection.DisposeAsync();
    }

    [Fact]
    public async Task Unbind_PendingAcceptReturnsNull()
    {
        var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var accept = listener.AcceptAsync().AsTask();
        await listener.UnbindAsync();
        Assert.Null(await accept.WaitAsync(Net.Patience));
        await listener.DisposeAsync();
    }
}
