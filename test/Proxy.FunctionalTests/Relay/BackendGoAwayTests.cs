using System.Collections.Concurrent;
using System.Net;
using Proxy.Codecs.Http2;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// A backend that shuts down while the relay has many streams open on its connection (RFC 9113 §6.8): the streams above
/// its GOAWAY's last stream id were never processed, so the relay sends them again on a new connection and the clients
/// never see the shutdown.
/// </summary>
public sealed class BackendGoAwayTests
{
    private const int Requests = 10;
    private const int AnsweredBeforeGoAway = 3;

    private static string Body(string? path) => $"answer to {path}";

    [Fact]
    public async Task GoAway_TenStreamsInFlightThreeAnswered_UnprocessedStreamsRetriedOnNewConnectionAllSucceed()
    {
        var firstConnection = new TaskCompletionSource<(string[] AnsweredPaths, string[] AllPaths)>(
            TaskCreationOptions.RunContinuationsAsynchronously);
        var laterPaths = new ConcurrentQueue<string>();
        await using var backend = ScriptedHttp2Backend.Start(async connection =>
        {
            if (connection.Index > 1)
            {
                // Later connections answer everything.
                await foreach (var request in connection.RequestsAsync())
                {
                    laterPaths.Enqueue(request[":path"]!);
                    await connection.RespondAsync(request.StreamId, Body(request[":path"]));
                }

                return;
            }

            // The first connection: all ten heads in, the three oldest answered, then GOAWAY naming the last answered
            // stream, and FIN right after it.
            var requests = new List<Http2TestHeaders>();
            while (requests.Count < Requests)
            {
                requests.Add(await connection.NextRequestAsync());
            }

            var ordered = requests.OrderBy(r => r.StreamId).ToArray();
            var answered = ordered.Take(AnsweredBeforeGoAway).ToArray();
            foreach (var request in answered)
            {
                await connection.RespondAsync(request.StreamId, Body(request[":path"]));
            }

            await connection.Peer.SendGoAwayAsync(answered[^1].StreamId, Http2ErrorCode.NoError);
            connection.CloseTcp(abortive: false);
            await connection.Closed.WaitAsync(RelayProxy.Bound); // the proxy closes its side once the answered streams ended
            firstConnection.TrySetResult((answered.Select(r => r[":path"]!).ToArray(), ordered.Select(r => r[":path"]!).ToArray()));
        });
        var outcomes = new ForwardingOutcomes();
        await using var proxy = await RelayProxy.StartAsync(new ReverseProxyKeys().NativeRoute("goaway", "h2", backend.Address.ToString(), h2c: true), outcomes);
        using var client = RelayProxy.CreateClient(proxy);

        var results = await Task.WhenAll(Enumerable.Range(0, Requests).Select(async i =>
        {
            using var response = await client.GetAsync($"/goaway/{i}");
            return (Path: $"/goaway/{i}", response.StatusCode, Body: await response.Content.ReadAsStringAsync());
        })).WaitAsync(RelayProxy.Bound);
        var first = await firstConnection.Task.WaitAsync(RelayProxy.Bound);

        // Every client request succeeded with its own body: none of the streams the backend never processed failed.
        foreach (var r in results)
        {
            var outcome = await outcomes.ForAsync(r.Path);
            Assert.True(HttpStatusCode.OK == r.StatusCode && Body(r.Path) == r.Body && outcome.Error == ForwarderError.None,
                $"{r.Path}: {r.StatusCode} '{r.Body}'; outcomes: {outcomes.Describe()}");
        }
        // All ten were in flight on the first connection; the three oldest were answered there (GOAWAY last id = the third).
        Assert.Equal(results.Select(r => r.Path).Order(), first.AllPaths.Order());
        // The other seven reached the backend again on a later connection, each exactly once; no answered one was repeated.
        Assert.True(backend.ConnectionCount >= 2, $"The backend saw {backend.ConnectionCount} connection(s).");
        Assert.Equal(first.AllPaths.Except(first.AnsweredPaths).Order(), laterPaths.Order());
        Assert.Empty(backend.Faults);
    }

    [Fact]
    public async Task GoAway_BeforeAPostWasProcessed_TheBodyIsSentAgainWholeOnANewConnection()
    {
        // The body is kept (a pooled copy) until the response head arrives: a request the backend refused unprocessed
        // goes again with every byte, and the copy is not reused for another request meanwhile.
        var first = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = ScriptedHttp2Backend.Start(async connection =>
        {
            if (connection.Index > 1)
            {
                await foreach (var request in connection.RequestsAsync())
                {
                    var body = await connection.RequestBodyAsync(request.StreamId);
                    await connection.RespondAsync(request.StreamId, $"{body.Length}:{Convert.ToHexString(System.Security.Cryptography.SHA256.HashData(body))}");
                }

                return;
            }

            // The first connection takes the whole request, then says it processed nothing (GOAWAY last id 0).
            var only = await connection.NextRequestAsync();
            var seen = await connection.RequestBodyAsync(only.StreamId);
            await connection.Peer.SendGoAwayAsync(0, Http2ErrorCode.NoError);
            connection.CloseTcp(abortive: false);
            first.TrySetResult(seen.Length);
        });
        var outcomes = new ForwardingOutcomes();
        await using var proxy = await RelayProxy.StartAsync(new ReverseProxyKeys().NativeRoute("goaway", "h2", backend.Address.ToString(), h2c: true), outcomes);
        using var client = RelayProxy.CreateClient(proxy);
        var sent = new byte[3000];
        new Random(3000).NextBytes(sent);

        using var response = await client.PostAsync("/goaway/post", new ByteArrayContent(sent)).WaitAsync(RelayProxy.Bound);
        var answer = await response.Content.ReadAsStringAsync();

        Assert.Equal(sent.Length, await first.Task.WaitAsync(RelayProxy.Bound)); // the first connection had it all
        Assert.True(HttpStatusCode.OK == response.StatusCode, $"{response.StatusCode} '{answer}'; outcomes: {outcomes.Describe()}");
        Assert.Equal($"{sent.Length}:{Convert.ToHexString(System.Security.Cryptography.SHA256.HashData(sent))}", answer);
        Assert.True(backend.ConnectionCount >= 2, $"The backend saw {backend.ConnectionCount} connection(s).");
        Assert.Empty(backend.Faults);
    }
}
