using System.Diagnostics;
using System.Net;
using System.Net.Sockets;

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
        var port = FreePort();
        var dotnet = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host && File.Exists(host) ? host : "dotnet";
        // Output redirected and never read: the pipe fills after a few hundred access-log lines, the logger's queue
        // (2,500 messages) after a few thousand more.
        var start = new ProcessStartInfo(dotnet) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var argument in (string[])[Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"), .. HostRunner.PortZeroArguments(folder),
            $"--urls=http://127.0.0.1:{port}", "--AccessLog:Enabled=true", "--DirectPath:Enabled=true"])
        {
            start.ArgumentList.Add(argument);
        }
        using var process = Process.Start(start)!;
        try
        {
            await WaitUntilListeningAsync(port, process);
            using var client = http2 ? HostRunner.Http2Client() : new HttpClient { Timeout = TimeSpan.FromSeconds(30) };
            var url = new Uri($"http://127.0.0.1:{port}/");
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

    private static int FreePort()
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        socket.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        return ((IPEndPoint)socket.LocalEndPoint!).Port;
    }

    // Polls the port until the proxy accepts (its output cannot be read for the "listening" line here).
    private static async Task WaitUntilListeningAsync(int port, Process process)
    {
        using var guard = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        while (true)
        {
            Assert.False(process.HasExited, "the proxy exited before it listened");
            using var probe = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            try
            {
                await probe.ConnectAsync(new IPEndPoint(IPAddress.Loopback, port), guard.Token);
                return;
            }
            catch (SocketException)
            {
                await Task.Delay(100, guard.Token);
            }
        }
    }
}
