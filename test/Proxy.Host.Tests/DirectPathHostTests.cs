namespace Proxy.Host.Tests;

/// <summary>
/// DirectPath:Enabled in the standalone proxy: on by default on our server (off on Kestrel), and the settings it cannot
/// honour stop the start with the key named.
/// </summary>
public sealed class DirectPathHostTests
{
    [Theory]
    [InlineData(new string[0], true)]
    [InlineData(new[] { "--DirectPath:Enabled=false" }, false)]
    public async Task OnOurServer_ProxyRoutesGoDirectUnlessTurnedOff(string[] arguments, bool direct)
    {
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, [.. arguments, "--Logging:LogLevel:Proxy.Relay.Direct=Information"]);
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(30) };

        // A request through the proxy (the demo's routes) answers either way.
        using var proxied = await client.GetAsync(new Uri(runner.Http, "/"));

        Assert.Equal(System.Net.HttpStatusCode.OK, proxied.StatusCode);
        if (direct)
        {
            // The direct path logs each route's way when it builds its table (as the host starts, or at the latest for
            // the first request).
            await logs.WaitForAsync(m => m.Contains("takes the direct path", StringComparison.Ordinal)).WaitAsync(TimeSpan.FromSeconds(30));
        }
        else
        {
            Assert.Empty(logs.Entries("Proxy.Relay.Direct")); // not registered at all: nothing ever builds a table
        }
    }

    [Theory]
    [InlineData("--DirectPath:Enabled=yes", "DirectPath:Enabled must be true or false, not 'yes'")]
    [InlineData("--DirectPath:Enabled=true --Host:Server=kestrel", "DirectPath:Enabled needs our server: Host:Server is Kestrel")]
    public async Task RunAsync_SettingItCannotHonour_ExitsOneNamingTheKey(string arguments, string expected)
    {
        using var folder = new TempFolder();
        using var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), .. arguments.Split(' ')], error);

        Assert.Equal(1, exitCode);
        Assert.Contains(expected, error.ToString(), StringComparison.Ordinal);
    }
}
