using System.Net;
using System.Net.Sockets;
using System.Text.RegularExpressions;

namespace Proxy.Host.Tests;

/// <summary>The proxy as a process under a small open-file limit, against more connections than it has descriptors.</summary>
public class FileLimitTests
{
    /// <summary>
    /// 600 idle connections to a proxy allowed 512 open files: it accepts up to its connection bound (derived from the
    /// limit), says so, leaves the rest in the listen backlog, and stays up; once they close it serves a request. Before
    /// the bound, the accepts took every descriptor and the runtime aborted ("Out of memory.") when it could not get a
    /// pipe for a new thread.
    /// </summary>
    /// <remarks>
    /// NOTE: 512, not 256: the runtime keeps every assembly it loads open as a file (about 220 for this host once it has
    /// served a request), most of them loaded after the bound was derived, so at 256 the bound sat at its floor (16)
    /// with no reserve left, and whichever request first needed a descriptor or a thread (a backend socket, the timer
    /// thread) failed or took the process down, depending on the path it ran on.
    /// </remarks>
    [Fact]
    public async Task MoreConnectionsThanFileDescriptors_TheRestWaitInTheBacklog_ProcessStaysUpAndServes()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // the bound is derived from the open-file limit on Linux only
        }

        using var folder = new TempFolder();
        using var proxy = ProxyProcess.StartWithFileLimit(512, Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            "--urls=http://127.0.0.1:0", "--Demo:Enabled=false", "--Admin:Enabled=false",
            $"--ProxyServer:DevelopmentCertificateDirectory={folder.Path}",
            "--Logging:LogLevel:Default=Warning", "--Logging:LogLevel:Proxy.Host=Information", "--Logging:LogLevel:Proxy.Server=Information");
        var patience = TimeSpan.FromSeconds(60); // a guard against a hang, not a timing assertion
        var bound = await proxy.WaitForLineAsync("ProxyServer:MaxConcurrentConnections), from the open-file limit 512").WaitAsync(patience);
        var listening = await proxy.WaitForLineAsync("Proxy listening on ").WaitAsync(patience);
        var port = int.Parse(Regex.Match(listening, @"http://127\.0\.0\.1:(\d+)").Groups[1].Value);
        var max = int.Parse(Regex.Match(bound, @"at most (\d+) open").Groups[1].Value);
        Assert.InRange(max, 16, 512 - 128);

        var flood = new List<Socket>();
        try
        {
            for (var i = 0; i < 600; i++)
            {
                var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                flood.Add(socket);
                await socket.ConnectAsync(new IPEndPoint(IPAddress.Loopback, port)).WaitAsync(patience); // the kernel completes it into the backlog
            }

            await proxy.WaitForLineAsync($"{max} connections are open (ProxyServer:MaxConcurrentConnections)").WaitAsync(patience);
            Assert.False(proxy.Process.HasExited);
        }
        finally
        {
            foreach (var socket in flood)
            {
                socket.Dispose();
            }
        }

        using var client = new HttpClient();
        using var response = await client.GetAsync($"http://127.0.0.1:{port}/");
        Assert.True((int)response.StatusCode >= 200); // an answer, whatever the bundled routes make of "/"
        Assert.False(proxy.Process.HasExited);
    }
}
