namespace Proxy.Host.Tests;

/// <summary>The socket engine mode the standalone proxy runs with, as its startup log reports it from the runtime's own flag.</summary>
public sealed class SocketEngineTests
{
    private static async Task<string> CompletionLineAsync()
    {
        using var folder = new TempFolder();
        using var proxy = ProxyProcess.Start(Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            [.. HostRunner.PortZeroArguments(folder), "--Logging:LogLevel:Proxy.Host=Information"]);
        return (await proxy.WaitForLineAsync("Socket completions run ")).Trim();
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
