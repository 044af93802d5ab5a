namespace Proxy.Host.Tests;

/// <summary>DirectPath:Enabled in the standalone proxy: the settings it cannot honour stop the start with the key named.</summary>
public sealed class DirectPathHostTests
{
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
