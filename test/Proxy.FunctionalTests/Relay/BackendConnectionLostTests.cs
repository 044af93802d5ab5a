using System.Collections.Concurrent;
using System.Net;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// An HTTP/2 backend whose TCP connection ends (FIN or reset, no GOAWAY) while a request waits for its response head:
/// the request may have been processed, so it is not retried (RFC 9113 §8.7 allows a retry only for streams the server
/// says it did not process); the client gets 502, and the next request gets a new backend connection.
/// </summary>
/// <remarks>
/// A backend that stops answering keep-alive PINGs is covered here with short cluster settings
/// (HttpClient:KeepAlivePingDelay / KeepAlivePingTimeout), and on <c>Http2ClientConnection</c> with virtual time.
/// </remarks>
public sealed class BackendConnectionLostTests
{
    [Fact]
    public async Task BackendStopsAnsweringPings_ConnectionClosed_502()
    {
        using var listener = new System.Net.Sockets.TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        var address = $"http://127.0.0.1:{((IPEndPoint)listener.LocalEndpoint).Port}/";
        var outcomes = new ForwardingOutcomes();
        var keys = new ReverseProxyKeys().NativeRoute("silent", "h2", address, h2c: true)
            .ClusterSet("h2", "HttpClient:KeepAlivePingDelay", "00:00:01")
            .ClusterSet("h2", "HttpClient:KeepAlivePingTimeout", "00:00:01");
        await using var proxy = await RelayProxy.StartAsync(keys, outcomes);
        using var client = RelayProxy.CreateClient(proxy);

        var response = client.GetAsync("/silent/x");
        using var socket = await listener.AcceptSocketAsync().WaitAsync(RelayProxy.Bound);
        await using var backend = Proxy.Testing.Http2.Http2TestPeer.Over(socket);
        await backend.AcceptHandshakeAsync();
        await backend.ExpectHeadersAsync(1);
        // From here the backend is alive for TCP but answers nothing: the proxy's PING goes unanswered.
        var ping = await backend.ExpectFrameAsync(Proxy.Codecs.Http2.Http2FrameType.Ping);
        Assert.False(ping.IsAck);

        using var answer = await response.WaitAsync(RelayProxy.Bound);
        Assert.Equal(HttpStatusCode.BadGateway, answer.StatusCode);
        var (error, exception) = await outcomes.ForAsync("/silent/x");
        Assert.Equal(ForwarderError.Request, error);
        Assert.Contains("PING", exception?.Message ?? "");
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task BackendClosesBeforeResponseHead_Get_502AndNextRequestSucceedsOnNewConnection(bool reset)
    {
        var firstConnectionRequests = 0;
        var laterPaths = new ConcurrentQueue<string>();
        await using var backend = ScriptedHttp2Backend.Start(async connection =>
        {
            if (connection.Index == 1)
            {
                await connection.NextRequestAsync();
                Interlocked.Increment(ref firstConnectionRequests);
                connection.CloseTcp(abortive: reset);
                return;
            }

            await foreach (var request in connection.RequestsAsync())
            {
                laterPaths.Enqueue(request[":path"]!);
                await connection.RespondAsync(request.StreamId, "fresh connection");
            }
        });
        var outcomes = new ForwardingOutcomes();
        await using var proxy = await RelayProxy.StartAsync(new ReverseProxyKeys().NativeRoute("lost", "h2", backend.Address.ToString(), h2c: true), outcomes);
        using var client = RelayProxy.CreateClient(proxy);

        using var lost = await client.GetAsync("/lost/first").WaitAsync(RelayProxy.Bound);
        using var next = await client.GetAsync("/lost/second").WaitAsync(RelayProxy.Bound);

        var lostOutcome = await outcomes.ForAsync("/lost/first");
        await outcomes.ForAsync("/lost/second");
        var diagnostics = $"outcomes: {outcomes.Describe()}; backend connections: {backend.ConnectionCount}, later: [{string.Join(", ", laterPaths)}]";

        Assert.True(HttpStatusCode.BadGateway == lost.StatusCode, $"First: {lost.StatusCode}; {diagnostics}");
        Assert.Equal(ForwarderError.Request, lostOutcome.Error);
        Assert.True(HttpStatusCode.OK == next.StatusCode, $"Next: {next.StatusCode}; {diagnostics}");
        Assert.Equal("fresh connection", await next.Content.ReadAsStringAsync());
        Assert.Equal(1, Volatile.Read(ref firstConnectionRequests));
        Assert.Equal(["/lost/second"], laterPaths); // the lost request was not sent again (it may have been processed)
        Assert.True(backend.ConnectionCount >= 2, diagnostics);
        Assert.Empty(backend.Faults);
    }
}
