namespace Proxy.Host.Tests;

/// <summary>The socket engine mode the standalone proxy runs with, as its startup log reports it from the runtime's own flag.</summary>
public sealed class SocketEngineTests
{
    private static Task<string> CompletionLineAsync() => StartupLineAsync("Socket completions run ");

    private static async Task<string> StartupLineAsync(string start, params string[] arguments)
    {
        using var folder = new TempFolder();
        using var proxy = ProxyProcess.Start(Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            [.. HostRunner.PortZeroArguments(folder), "--Logging:LogLevel:Proxy.Host=Information", .. arguments]);
        return (await proxy.WaitForLineAsync(start)).Trim();
    }

    [Fact]
    public async Task StandaloneProxy_OnLinux_UsesOurEpollEngine()
    {
        var line = await StartupLineAsync("Socket engine: ");

        Assert.Contains(OperatingSystem.IsLinux() ? "Socket engine: Epoll " : "Socket engine: Runtime ", line);
    }

    [Fact]
    public async Task SocketEngine_SetToRuntime_IsTheRuntimes()
    {
        var line = await StartupLineAsync("Socket engine: ", "--ProxyServer:Sockets:Engine=Runtime");

        Assert.Contains("Socket engine: Runtime (ProxyServer:Sockets:Engine): the runtime's", line);
    }

    [Fact]
    public async Task StandaloneProxy_SocketCompletionsRunInline()
    {
        // NOTE: the child inherits this process's environment; a CI that sets the variable itself decides for it.
        var preset = Environment.GetEnvironmentVariable("DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS");
        var expected = preset is null or "1" ? "inline on the socket threads" : "on the thread pool";

        var line = await CompletionLineAsync();

        Assert.Contains($"Socket completions run {expected}", line);
    }
}

/// <summary>ProxyServer:Sockets:EpollThreads: the epoll engine runs as many threads as it says, and a value it cannot take stops the start.</summary>
public sealed class EpollThreadsTests
{
    [Fact]
    public async Task EpollThreads_One_TheEngineRunsOneThread()
    {
        using var folder = new TempFolder();
        using var proxy = ProxyProcess.Start(Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            [.. HostRunner.PortZeroArguments(folder), "--Logging:LogLevel:Proxy.Host=Information", "--ProxyServer:Sockets:EpollThreads=1"]);

        var line = (await proxy.WaitForLineAsync("Socket engine: ")).Trim();

        if (!OperatingSystem.IsLinux())
        {
            // The runtime's engine there: the log says the setting does not apply.
            Assert.Contains("the runtime's (ProxyServer:Sockets:EpollThreads=1 applies to the Epoll engine only)", line);
            return;
        }

        Assert.Contains("ours, 1 threads (ProxyServer:Sockets:EpollThreads)", line);
        // The listeners are bound by the time the line is logged, so the engine and its threads exist.
        var epollThreads = Directory.GetDirectories($"/proc/{proxy.Process.Id}/task")
            .Select(ThreadName)
            .Count(name => name.StartsWith("Proxy epoll", StringComparison.Ordinal));
        Assert.Equal(1, epollThreads);
    }

    // A short-lived thread (a thread-pool worker, the tiering compiler) may end between the listing and the read.
    private static string ThreadName(string task)
    {
        try
        {
            return File.ReadAllText(Path.Combine(task, "comm")).Trim();
        }
        catch (Exception ex) when (ex is IOException or UnauthorizedAccessException)
        {
            return "";
        }
    }

    [Theory]
    [InlineData("-1")]
    [InlineData("two")]
    [InlineData("1025")]
    public async Task EpollThreads_NotACount_ExitsOneNamingTheKey(string value)
    {
        using var folder = new TempFolder();
        using var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--ProxyServer:Sockets:EpollThreads={value}"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains($"ProxyServer:Sockets:EpollThreads is '{value}'", error.ToString(), StringComparison.Ordinal);
    }
}
