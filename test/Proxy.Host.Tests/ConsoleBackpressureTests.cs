using System.Diagnostics;
using System.Text.RegularExpressions;

namespace Proxy.Host.Tests;

/// <summary>
/// A console nobody reads (a full pipe) does not stall the proxy: the console logger drops what its queue cannot hold
/// instead of blocking the caller, which on the direct path and HTTP/1.1 is an epoll thread serving other connections.
/// </summary>
public class ConsoleBackpressureTests
{
    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task StdoutNeverRead_AccessLogOnEveryRequest_RequestsCarryOn(bool http2)
    {
        using var folder = new TempFolder();
        var dotnet = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host && File.Exists(host) ? host : "dotnet";
        var start = new ProcessStartInfo(dotnet) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var argument in (string[])[Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"), .. HostRunner.PortZeroArguments(folder),
            "--urls=http://127.0.0.1:0", "--Logging:LogLevel:Proxy.Host=Information", "--AccessLog:Enabled=true", "--DirectPath:Enabled=true"])
        {
            start.ArgumentList.Add(argument);
        }
        using var process = Process.Start(start)!;
        try
        {
            // The output is read up to the "listening" line (for the port) and never after: the pipe fills after a few
            // hundred access-log lines, the logger's queue (2,500 messages) after a few thousand more.
            var url = await ListeningUrlAsync(process);
            using var client = http2 ? HostRunner.Http2Client() : new HttpClient { Timeout = TimeSpan.FromSeconds(30) };
            var failures = 0;
            await Parallel.ForEachAsync(Enumerable.Range(0, 8), async (_, _) =>
            {
                for (var i = 0; i < 1000; i++)
                {
                    using var response = await client.GetAsync(url);
                    await response.Content.ReadAsByteArrayAsync();
                    if (!response.IsSuccessStatusCode)
                    {
                        Interlocked.Increment(ref failures);
                    }
                }
            });

            Assert.Equal(0, failures);
            Assert.False(process.HasExited);
        }
        finally
        {
            process.Kill(entireProcessTree: true);
        }
    }

    /// <summary>Reads the proxy's output line by line until it says where it listens; the rest stays unread.</summary>
    private static async Task<Uri> ListeningUrlAsync(Process process)
    {
        using var guard = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        while (await process.StandardOutput.ReadLineAsync(guard.Token) is { } line)
        {
            if (line.Contains("Proxy listening on ", StringComparison.Ordinal))
            {
                return new Uri(Regex.Match(line, @"http://127\.0\.0\.1:\d+/").Value);
            }
        }
        throw new Xunit.Sdk.XunitException("The proxy exited before it listened.");
    }
}
