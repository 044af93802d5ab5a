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
