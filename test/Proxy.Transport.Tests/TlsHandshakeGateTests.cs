using System.Net.Security;
using System.Net.Sockets;
using Microsoft.AspNetCore.Connections;
using Microsoft.Extensions.Time.Testing;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class TlsHandshakeGateTests
{
    [Fact]
    public async Task Enter_BeyondTheBound_WaitsAndEntersFirstComeFirstServed()
    {
        var gate = new TlsHandshakeGate(2);
        var entering = gate.EnterAsync(default);
        Assert.True(entering.IsCompletedSuccessfully); // a free place: no wait
        var first = await entering;
        var second = await gate.EnterAsync(default);

        var third = gate.EnterAsync(default).AsTask();
        var fourth = gate.EnterAsync(default).AsTask();
        var fifth = gate.EnterAsync(default).AsTask();
        Assert.Equal(3, gate.Waiting);
        Assert.False(third.IsCompleted || fourth.IsCompleted || fifth.IsCompleted);

        first.Dispose();
        using var thirdPlace = await third.WaitAsync(Net.Patience);
        Assert.False(fourth.IsCompleted || fifth.IsCompleted);

        second.Dispose();
        second.Dispose(); // a second dispose gives nothing back twice
        using var fourthPlace = await fourth.WaitAsync(Net.Patience);
        Assert.False(fifth.IsCompleted);
        Assert.Equal(2, gate.Holding);
        Assert.Equal(1, gate.Waiting);

        fourthPlace.Dispose();
        using var fifthPlace = await fifth.WaitAsync(Net.Patience);
        Assert.Equal(2, gate.Holding);
        Assert.Equal(0, gate.Waiting);
    }

    [Fact]
    public async Task Place_HeldForTheHoldLimit_GoesBackAndTheNextEnters()
    {
        var time = new FakeTimeProvider();
        var gate = new TlsHandshakeGate(1, TimeSpan.FromSeconds(2), time);
        var stalled = await gate.EnterAsync(default);
        var next = gate.EnterAsync(default).AsTask();

        time.Advance(TimeSpan.FromSeconds(1.9));
        Assert.False(next.IsCompleted);
        Assert.False(stalled.Released);

        time.Advance(TimeSpan.FromSeconds(0.1));
        using var nextPlace = await next.WaitAsync(Net.Patience);
        Assert.True(stalled.Released);

        stalled.Dispose(); // its handshake ends later: nothing more goes back
        Assert.Equal(1, gate.Holding);
        Assert.False(gate.EnterAsync(default).IsCompleted);
    }

    [Fact]
    public async Task Enter_CancelledWhileWaiting_LeavesTheQueue()
    {
        var gate = new TlsHandshakeGate(1);
        var holder = await gate.EnterAsync(default);
        using var cancel = new CancellationTokenSource();
        var waiting = gate.EnterAsync(cancel.Token).AsTask();

        cancel.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting.WaitAsync(Net.Patience));
        Assert.Equal(0, gate.Waiting);

        holder.Dispose();
        Assert.Equal(0, gate.Holding);
        using var again = await gate.EnterAsync(default);
        Assert.Equal(1, gate.Holding);
    }

    /// <summary>Real sockets: an idle TCP connection (no ClientHello) takes no place, so a TLS client behind it gets through.</summary>
    [Fact]
    public async Task Handshake_IdleConnectionAhead_HoldsNoPlace()
    {
        var gate = new TlsHandshakeGate(1);
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, HandshakeGate = gate };
        await using var listener = SocketConnectionListener.Bind(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, 0), new SocketTransportOptions());
        using var idle = await Net.ConnectAsync(listener.EndPoint);
        var idleConnection = (await listener.AcceptAsync())!;
        var idleServer = new TlsConnectionMiddleware(_ => Task.CompletedTask, options).OnConnectionAsync(idleConnection);

        var (client, server) = await TlsConnectionMiddlewareTests.ConnectAsync(listener, options, _ => Task.CompletedTask, SslApplicationProtocol.Http2);
        await using (client)
        {
            await server.WaitAsync(Net.Patience);
        }

        Assert.False(idleServer.IsCompleted); // still waiting for its first bytes, outside the gate
        Assert.Equal(0, gate.Holding);
        idle.Close();
        await idleServer.WaitAsync(Net.Patience);
        await idleConnection.DisposeAsync();
    }

    /// <summary>
    /// Real sockets: a client that sent the start of a ClientHello and stalls holds the one place; a real TLS client waits
    /// at the gate until the stalled one's hold limit passes, then completes its handshake.
    /// </summary>
    [Fact]
    public async Task Handshake_PlaceHeldByAStalledClient_NextClientWaitsForTheHoldLimit()
    {
        var time = new FakeTimeProvider();
        var gate = new TlsHandshakeGate(1, TimeSpan.FromSeconds(2), time);
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, HandshakeGate = gate };
        var middleware = new TlsConnectionMiddleware(_ => Task.CompletedTask, options, time: time);
        await using var listener = SocketConnectionListener.Bind(new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, 0), new SocketTransportOptions());

        using var stalled = await Net.ConnectAsync(listener.EndPoint);
        var stalledConnection = (await listener.AcceptAsync())!;
        var stalledServer = middleware.OnConnectionAsync(stalledConnection);
        // A TLS handshake record header announcing 512 bytes, and nothing after it.
        await stalled.SendAsync(new byte[] { 0x16, 0x03, 0x01, 0x02, 0x00 }, SocketFlags.None);
        Assert.True(SpinWait.SpinUntil(() => gate.Holding == 1, Net.Patience), "the stalled client never took the place");

        using var socket = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var server = middleware.OnConnectionAsync(connection);
        await using var client = new SslStream(new NetworkStream(socket, ownsSocket: false));
        var handshake = client.AuthenticateAsClientAsync(new SslClientAuthenticationOptions
        {
            TargetHost = "localhost",
            RemoteCertificateValidationCallback = (_, _, _, _) => true,
        });
        Assert.True(SpinWait.SpinUntil(() => gate.Waiting == 1, Net.Patience), "the second client never reached the gate");
        Assert.False(handshake.IsCompleted);

        time.Advance(TimeSpan.FromSeconds(2));
        await handshake.WaitAsync(Net.Patience);
        Assert.Equal(0, gate.Waiting);

        client.Close();
        await server.WaitAsync(Net.Patience);
        stalled.Close();
        await stalledServer.WaitAsync(Net.Patience);
        await connection.DisposeAsync();
        await stalledConnection.DisposeAsync();
    }
}
