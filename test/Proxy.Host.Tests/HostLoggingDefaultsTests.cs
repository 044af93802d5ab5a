using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>The logging defaults Proxy.Host starts with, as the running app's logger factory applies them.</summary>
public sealed class HostLoggingDefaultsTests
{
    // ASP.NET Core's HostingApplicationDiagnostics starts a per-request Activity and log scope when this category is
    // enabled at Critical: the proxy turns it off by default, and a user's own setting brings it back.
    private const string HostingDiagnostics = "Microsoft.AspNetCore.Hosting.Diagnostics";

    [Fact]
    public async Task HostingDiagnostics_OffByDefault()
    {
        await using var runner = await HostRunner.StartAsync("--Admin:Enabled=false");

        Assert.False(Logger(runner, HostingDiagnostics).IsEnabled(LogLevel.Critical));
        // The rest of Microsoft.AspNetCore keeps its Warning default.
        Assert.True(Logger(runner, "Microsoft.AspNetCore.Routing").IsEnabled(LogLevel.Warning));
    }

    [Fact]
    public async Task HostingDiagnostics_UserSettingWins()
    {
        await using var runner = await HostRunner.StartAsync("--Admin:Enabled=false", $"--Logging:LogLevel:{HostingDiagnostics}=Information");

        Assert.True(Logger(runner, HostingDiagnostics).IsEnabled(LogLevel.Information));
    }

    private static ILogger Logger(HostRunner runner, string category) =>
        runner.Host.App.Services.GetRequiredService<ILoggerFactory>().CreateLogger(category);
}
