using System.Text.Json;
using System.Text.RegularExpressions;

namespace Proxy.Host.Tests;

/// <summary>The standard console options (Logging:Console:FormatterName and FormatterOptions) work on the real process.</summary>
public sealed class ConsoleFormatterTests
{
    [Fact]
    public async Task FormatterName_Json_OneJsonObjectPerMessage()
    {
        var line = await StartupLineAsync("--Logging:Console:FormatterName=json");

        using var entry = JsonDocument.Parse(line);
        Assert.Equal("Proxy.Host", entry.RootElement.GetProperty("Category").GetString());
        Assert.Equal("Information", entry.RootElement.GetProperty("LogLevel").GetString());
        Assert.Equal(1, entry.RootElement.GetProperty("EventId").GetInt32());
        Assert.StartsWith("Proxy listening on https://127.0.0.1:", entry.RootElement.GetProperty("Message").GetString(), StringComparison.Ordinal);
        Assert.Equal("Proxy", entry.RootElement.GetProperty("State").GetProperty("Server").GetString());
    }

    [Fact]
    public async Task FormatterName_Systemd_SyslogPriorityPrefix()
    {
        var line = await StartupLineAsync("--Logging:Console:FormatterName=systemd");

        Assert.StartsWith("<6>Proxy.Host[1] Proxy listening on ", line, StringComparison.Ordinal);
    }

    [Fact]
    public async Task NoFormatterConfigured_SimpleSingleLineWithShortTimestamp()
    {
        var line = await StartupLineAsync();

        Assert.Matches(new Regex(@"^\d\d:\d\d:\d\d info: Proxy\.Host\[1\] Proxy listening on "), line);
    }

    /// <summary>The "Proxy listening on" line of a proxy process started with <paramref name="arguments"/>.</summary>
    private static async Task<string> StartupLineAsync(params string[] arguments)
    {
        using var folder = new TempFolder();
        using var proxy = ProxyProcess.Start(Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            [.. HostRunner.PortZeroArguments(folder), "--Logging:LogLevel:Proxy.Host=Information", .. arguments]);
        return (await proxy.WaitForLineAsync("Proxy listening on ")).Trim();
    }
}
