using System.Net;
using System.Text.Json;

namespace Proxy.Host.Tests;

/// <summary>
/// The dashboard's data without a browser: snapshots from /dashboard/events, read as they come (one a second) until
/// one shows what the test waits for.
/// </summary>
public sealed class DashboardFeedTests
{
    [Fact]
    public async Task Events_OnKestrel_CountProxyConnectionsAndRequestsButNotAdminOnes()
    {
        await using var runner = await HostRunner.StartAsync("--Host:Server=kestrel");
        using var admin = new HttpClient { Timeout = Timeout.InfiniteTimeSpan };
        using var events = await admin.GetAsync(new Uri(runner.Admin, "/dashboard/events"), HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal("text/event-stream", events.Content.Headers.ContentType?.MediaType);
        using var snapshots = new StreamReader(await events.Content.ReadAsStreamAsync());

        using var client = new HttpClient(); // keeps its connection to the proxy open
        for (var i = 0; i < 3; i++)
        {
            using var response = await client.GetAsync(new Uri(runner.Http, "/"));
            Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        }

        using var seen = await NextSnapshotAsync(snapshots, s => s.GetProperty("httpServerRequests").GetDouble() >= 3
            && s.GetProperty("requests").GetProperty("total").GetDouble() >= 3);
        var snapshot = seen.RootElement;
        // Only the proxy app's meters count: the admin endpoint's own requests (this stream) are not proxy traffic.
        Assert.Equal(3, snapshot.GetProperty("httpServerRequests").GetDouble());
        Assert.Equal(3, snapshot.GetProperty("requests").GetProperty("total").GetDouble());
        Assert.True(snapshot.GetProperty("connections").GetProperty("active").GetDouble() >= 1); // Kestrel's kestrel.active_connections
        Assert.Contains("kestrel.active_connections", snapshot.GetProperty("instruments").EnumerateArray().Select(i => i.GetString()));
        var sse = snapshot.GetProperty("clusters").EnumerateArray().Single(c => c.GetProperty("id").GetString() == "demo-sse");
        Assert.Equal("sse", sse.GetProperty("destinations")[0].GetProperty("id").GetString());
        Assert.True(snapshot.GetProperty("latencyMs").GetProperty("p99").GetDouble() > 0); // values are kept while this stream watches
    }

    /// <summary>The first snapshot on the stream that <paramref name="done"/> accepts (fails after 60 s of snapshots that do not).</summary>
    private static async Task<JsonDocument> NextSnapshotAsync(StreamReader reader, Func<JsonElement, bool> done)
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        while (await reader.ReadLineAsync(timeout.Token) is { } line)
        {
            if (!line.StartsWith("data: ", StringComparison.Ordinal))
            {
                continue;
            }

            var snapshot = JsonDocument.Parse(line["data: ".Length..]);
            if (done(snapshot.RootElement))
            {
                return snapshot;
            }

            snapshot.Dispose();
        }

        throw new InvalidOperationException("The dashboard stream ended.");
    }
}
