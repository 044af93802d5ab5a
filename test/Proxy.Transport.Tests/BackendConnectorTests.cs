using System.Net;
using System.Net.Sockets;
using System.Text;
using Proxy.Transport.Client;
using Proxy.Transport.Sockets;

namespace Proxy.Transport.Tests;

/// <summary>Backend connections on each engine (the epoll engine connects without the runtime's socket engine).</summary>
public class BackendConnectorTests
{
    public static TheoryData<SocketEngine, string> EnginesAndHosts()
    {
        var data = new TheoryData<SocketEngine, string> { { SocketEngine.Runtime, "127.0.0.1" }, { SocketEngine.Runtime, "localhost" } };
        if (OperatingSystem.IsLinux())
        {
            data.Add(SocketEngine.Epoll, "127.0.0.1");
            data.Add(SocketEngine.Epoll, "localhost");
        }
        return data;
    }

    public static TheoryData<SocketEngine> Engines() => SocketTransportTests.Engines();

    [Theory]
    [MemberData(nameof(EnginesAndHosts))]
    public async Task Connect_BytesRoundTrip(SocketEngine engine, string host)
    {
        using var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        var port = ((IPEndPoint)listener.LocalEndPoint!).Port;

        await using var backend = await BackendConnector.ConnectAsync(host, port, null, TimeSpan.FromSeconds(10),
            new SocketTransportOptions { Engine = engine });
        using var accepted = await listener.AcceptAsync().WaitAsync(Net.Patience);
        Assert.Equal(port, ((IPEndPoint)backend.RemoteEndPoint!).Port);

        await backend.Transport.Output.WriteAsync("hello"u8.ToArray());
        using var stream = new NetworkStream(accepted);
        Assert.Equal("hello", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(stream, 5).WaitAsync(Net.Patience)));
        await stream.WriteAsync("world"u8.ToArray());
        var result = await backend.Transport.Input.ReadAtLeastAsync(5).AsTask().WaitAsync(Net.Patience);
        Assert.Equal("world", Encoding.ASCII.GetString(result.Buffer.Slice(0, 5)));
        backend.Transport.Input.AdvanceTo(result.Buffer.GetPosition(5));
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Connect_NothingListening_ThrowsConnectionRefused(SocketEngine engine)
    {
        int port;
        using (var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
        {
            probe.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            port = ((IPEndPoint)probe.LocalEndPoint!).Port; // bound, never listening: connects are refused
            var e = await Assert.ThrowsAsync<SocketException>(async () => await BackendConnector.ConnectAsync("127.0.0.1", port, null,
                TimeSpan.FromSeconds(10), new SocketTransportOptions { Engine = engine }));
            Assert.Equal(SocketError.ConnectionRefused, e.SocketErrorCode);
        }
    }
}
