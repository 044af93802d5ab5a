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
}
