using System.Net;

namespace Proxy.Host.Tests;

/// <summary>A graceful stop (Ctrl+C, SIGTERM) with event streams open through the proxy.</summary>
public sealed class ShutdownTests
{
    /// <summary>
    /// Without the forwarder ending event streams on ApplicationStopping, the stop below waits for the host's shutdown
    /// timeout (30 s) and then aborts the stream: the read fails and the server logs that it aborted connections.
    /// </summary>
    [Theory]
    [InlineData("proxy", "1.1")]
    [InlineData("proxy", "2.0")]
    [InlineData("kestrel", "1.1")]
    public async Task StopAsync_EventStreamOpenThroughProxy_StreamEndsCleanlyWithoutWaitingForTheDrain(string server, string version)
    {
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, $"--Host:Server={server}");
        using var client = HostRunner.Http2Client();
        using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(runner.Http, "/events")) { Version = Version.Parse(version), VersionPolicy = HttpVersionPolicy.RequestVersionExact };
        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
        string? line;
        do
        {
            line = await reader.ReadLineAsync(); // the first event: the stream is open from the backend to the client
        }
        while (line is not null && !line.StartsWith("data:", StringComparison.Ordinal));

        Assert.NotNull(line);

        // No token: only the host's own shutdown timeout could end a stream the proxy kept open, and with an abort.
        var stop = runner.Host.App.StopAsync();
        var rest = await reader.ReadToEndAsync(); // throws if the stream was aborted instead of ended
        await stop;

        Assert.NotNull(rest);
        Assert.Equal(version, response.Version.ToString());
        var aborted = logs.WaitForAsync(m => m.Contains("aborting", StringComparison.OrdinalIgnoreCase));
        Assert.False(aborted.IsCompleted, "The drain timed out and aborted connections.");
    }
}
