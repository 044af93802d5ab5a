using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using Microsoft.Extensions.Time.Testing;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class TlsHandshakeGateTests
{
    [Fact]
    public async Task WaitForRoom_AtTheBound_WaitsUntilAHandshakeEnds()
    {
        var gate = new TlsHandshakeGate(2);
        Assert.True(gate.WaitForRoomAsync(default).IsCompletedSuccessfully);
        var first = gate.Enter();
        Assert.True(gate.WaitForRoomAsync(default).IsCompletedSuccessfully);
        var second = gate.Enter();
        var third = gate.Enter(); // accepted before the bound was seen: counted, never refused
        Assert.Equal(3, gate.InProgress);

        var acceptA = gate.WaitForRoomAsync(default).AsTask();
        var acceptB = gate.WaitForRoomAsync(default).AsTask();
        Assert.Equal(2, gate.AcceptsWaiting);
        Assert.False(acceptA.IsCompleted || acceptB.IsCompleted);

        third.Dispose(); // 2 in progress: still at the bound
        Assert.False(acceptA.IsCompleted || acceptB.IsCompleted);
        second.Dispose();
        second.Dispose(); // a second dispose counts nothing twice
        await Task.WhenAll(acceptA, acceptB).WaitAsync(Net.Patience);
        Assert.Equal(1, gate.InProgress);
        Assert.Equal(0, gate.AcceptsWaiting);
        first.Dispose();
        Assert.Equal(0, gate.InProgress);
    }

    [Fact]
    public async Task Place_CountedForTheHoldLimit_ThenTheAcceptLoopGoesOn()
    {
        var time = new FakeTimeProvider();
        var gate = new TlsHandshakeGate(1, TimeSpan.FromSeconds(2), time);
        var stalled = gate.Enter();
        var accept = gate.WaitForRoomAsync(default).AsTask();

        time.Advance(TimeSpan.FromSeconds(1.9));
        Assert.False(accept.IsCompleted);
        Assert.False(stalled.Released);

        time.Advance(TimeSpan.FromSeconds(0.1));
        await accept.WaitAsync(Net.Patience);
        Assert.True(stalled.Released);
        Assert.Equal(0, gate.InProgress);

        var next = gate.Enter();
        stalled.Dispose(); // its handshake ends later: the count is not taken twice
        Assert.Equal(1, gate.InProgress);
        next.Dispose();
    }

    [Fact]
    public async Task WaitForRoom_Cancelled_StopsWaiting()
    {
        var gate = new TlsHandshakeGate(1);
        using var holder = gate.Enter();
        using var cancel = new CancellationTokenSource();
        var accept = gate.WaitForRoomAsync(cancel.Token).AsTask();

        cancel.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => accept.WaitAsync(Net.Patience));
        Assert.Equal(0, gate.AcceptsWaiting);
    }

    /// <summary>Real sockets: an idle TCP connection (no ClientHello) does not count; a TLS client's handshake counts while it runs.</summary>
    [Fact]
    public async Task Handshake_IdleConnection_DoesNotCount()
    {
        var gate = new TlsHandshakeGate(1);
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, HandshakeGate = gate };
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), new SocketTransportOptions());
        using var idle = await Net.ConnectAsync(listener.EndPoint);
        var idleConnection = (await listener.AcceptAsync())!;
        var idleServer = new TlsConnectionMiddleware(_ => Task.CompletedTask, options).OnConnectionAsync(idleConnection);

        var counted = -1;
        var (client, server) = await TlsConnectionMiddlewareTests.ConnectAsync(listener, options, _ =>
        {
            counted = gate.InProgress; // after the handshake: it no longer counts
            return Task.CompletedTask;
        }, SslApplicationProtocol.Http2);
        await using (client)
        {
            await server.WaitAsync(Net.Patience);
        }

        Assert.Equal(0, counted);
        Assert.False(idleServer.IsCompleted); // still waiting for its first bytes, uncounted
        Assert.Equal(0, gate.InProgress);
        idle.Close();
        await idleServer.WaitAsync(Net.Patience);
        await idleConnection.DisposeAsync();
    }

    /// <summary>Real sockets: a client that sent the start of a ClientHello and stalls counts until the hold limit passes.</summary>
    [Fact]
    public async Task Handshake_StalledClient_CountsUntilTheHoldLimit()
    {
        var time = new FakeTimeProvider();
        var gate = new TlsHandshakeGate(1, TimeSpan.FromSeconds(2), time);
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, HandshakeGate = gate };
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), new SocketTransportOptions());
        using var stalled = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var server = new TlsConnectionMiddleware(_ => Task.CompletedTask, options, time: time).OnConnectionAsync(connection);

        // A TLS handshake record header announcing 512 bytes, and nothing after it.
        await stalled.SendAsync(new byte[] { 0x16, 0x03, 0x01, 0x02, 0x00 }, SocketFlags.None);
        Assert.True(SpinWait.SpinUntil(() => gate.InProgress == 1, Net.Patience), "the stalled handshake never counted");

        time.Advance(TimeSpan.FromSeconds(2));
        Assert.Equal(0, gate.InProgress);
        Assert.False(server.IsCompleted); // the handshake itself goes on, until its own timeout or the client leaves

        stalled.Close();
        await server.WaitAsync(Net.Patience);
        Assert.Equal(0, gate.InProgress);
        await connection.DisposeAsync();
    }
}
