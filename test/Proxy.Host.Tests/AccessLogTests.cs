using System.Net;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Host.Tests;

/// <summary>AccessLog:Enabled: one structured message per request on the Proxy.AccessLog category.</summary>
public sealed class AccessLogTests
{
    private const string Category = "Proxy.AccessLog";

    // The direct path says at Information which routes it takes (the runner's default level is Warning).
    private const string DirectLogLevel = "--Logging:LogLevel:Proxy.Relay.Direct=Information";

    // With DirectPath:Enabled the requests skip the middleware; the direct path reports them to the same log.
    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task Enabled_ProxiedPost_OneLineWithRouteClusterDestinationStatusAndBytes(bool direct)
    {
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, "--AccessLog:Enabled=true", "--DirectPath:Enabled=" + direct, DirectLogLevel);
        using var client = HostRunner.Http2Client();

        using var response = await client.PostAsync(new Uri(runner.Https, "/?secret=not-logged"), new ByteArrayContent(new byte[1234]));
        var body = await response.Content.ReadAsByteArrayAsync();

        var entry = await logs.WaitForEntryAsync(e => e.Category == Category);
        Assert.Equal("POST", entry.Fields["Method"]);
        Assert.Equal("/", entry.Fields["Path"]);
        Assert.Equal("HTTP/2", entry.Fields["Protocol"]);
        Assert.Equal((int)response.StatusCode, entry.Fields["StatusCode"]);
        Assert.Equal("home", entry.Fields["Route"]);
        Assert.Equal("demo-sse", entry.Fields["Cluster"]);
        Assert.Equal("sse", entry.Fields["Destination"]);
        Assert.Equal(1234L, entry.Fields["BytesIn"]);
        Assert.Equal((long)body.Length, entry.Fields["BytesOut"]);
        Assert.Equal(ForwarderError.None, entry.Fields["Outcome"]);
        Assert.IsType<double>(entry.Fields["DurationMs"]);
        Assert.DoesNotContain("not-logged", entry.Message, StringComparison.Ordinal);
        Assert.StartsWith("POST / HTTP/2 ", entry.Message, StringComparison.Ordinal);
        AssertDirect(logs, "home", direct);
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task Enabled_DestinationRefusesConnections_LogsTheForwarderOutcome(bool direct)
    {
        using var folder = new TempFolder();
        var config = folder.Write("proxy.json", """
            { "ReverseProxy": {
                "Routes": { "dead": { "ClusterId": "dead", "Match": { "Path": "/{**rest}" } } },
                "Clusters": { "dead": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, "--config", config, "--AccessLog:Enabled=true", "--DirectPath:Enabled=" + direct, DirectLogLevel);
        using var client = new HttpClient();

        using var response = await client.GetAsync(new Uri(runner.Http, "/x"));

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
        var entry = await logs.WaitForEntryAsync(e => e.Category == Category);
        Assert.Equal(502, entry.Fields["StatusCode"]);
        Assert.Equal("HTTP/1.1", entry.Fields["Protocol"]);
        Assert.Equal(ForwarderError.Request, entry.Fields["Outcome"]);
        Assert.Equal("d1", entry.Fields["Destination"]);
        AssertDirect(logs, "dead", direct);
    }

    [Fact]
    public async Task Default_Off_NoAccessLogMessages()
    {
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs);
        using var client = new HttpClient();

        using var response = await client.GetAsync(new Uri(runner.Http, "/"));
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);

        // Off means the middleware is not in the pipeline at all, so nothing could arrive later either.
        Assert.Empty(logs.Entries(Category));
    }

    /// <summary>The request took the path the test asked for: the direct path logs, at its first request, which routes it takes.</summary>
    private static void AssertDirect(LogCapture logs, string route, bool direct)
    {
        var messages = logs.Entries("Proxy.Relay.Direct").Select(e => e.Message).ToList();
        var expected = $"Route '{route}' takes the direct path";
        if (direct)
        {
            Assert.Contains(messages, m => m.Contains(expected, StringComparison.Ordinal));
        }
        else
        {
            Assert.Empty(messages);
        }
    }
}
