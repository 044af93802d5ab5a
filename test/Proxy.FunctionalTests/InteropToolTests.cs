using Proxy.Testing.Interop;

namespace Proxy.FunctionalTests;

/// <summary>The skip-or-fail policy for missing peers (STYLE.md: in CI a missing tool is a failure).</summary>
public sealed class InteropToolTests
{
    [Fact]
    public void SkipReason_MissingOnDeveloperMachine_NamesDebianPackage()
    {
        var reason = InteropTool.Nghttp.SkipReason(isPresent: false, isCi: false);

        Assert.NotNull(reason);
        Assert.Contains("'nghttp' is not on PATH", reason);
        Assert.Contains("apt-get install nghttp2-client", reason);
    }

    [Fact]
    public void SkipReason_MissingInCi_RunsSoTheTestFails()
    {
        Assert.Null(InteropTool.Curl.SkipReason(isPresent: false, isCi: true));
        Assert.Throws<InvalidOperationException>(() => new InteropTool("no-such-tool-" + Guid.NewGuid().ToString("N"), "nothing").Require());
    }

    [Fact]
    public void SkipReason_H2specMissingInCi_StillSkips()
    {
        Assert.Contains("h2spec", InteropTool.H2spec.SkipReason(isPresent: false, isCi: true));
    }

    [Fact]
    public void SkipReason_Present_Runs()
    {
        Assert.Null(InteropTool.H2load.SkipReason(isPresent: true, isCi: false));
        Assert.Null(InteropTool.H2load.SkipReason(isPresent: true, isCi: true));
    }

    [Fact]
    public void Find_PathOrUnknownName_ExistingFileOrNull()
    {
        var self = Environment.ProcessPath!;

        Assert.Equal(self, ExecutableLocator.Find(self));
        Assert.Null(ExecutableLocator.Find("no-such-tool-" + Guid.NewGuid().ToString("N")));
    }
}
