namespace Proxy.Testing.Interop;

/// <summary>
/// A real peer the interop tests drive (curl, nghttp, h2load, h2spec, node), found on PATH.
/// In CI (<c>CI=true</c>) a missing tool is a failure; on a developer's machine it is a skip
/// that names the Debian package to install.
/// </summary>
public sealed record InteropTool(string Command, string InstallHint, bool SkipInCiWhenMissing = false)
{
    public static readonly InteropTool Curl = new("curl", "apt-get install curl");
    public static readonly InteropTool Nghttp = new("nghttp", "apt-get install nghttp2-client");
    public static readonly InteropTool H2load = new("h2load", "apt-get install nghttp2-client");
    /// <summary>A real browser for the dashboard and demo page tests (driven by Playwright, which cannot download its own here).</summary>
    public static readonly InteropTool Chromium = new("chromium", "apt-get install chromium");
    public static readonly InteropTool Node = new("node", "apt-get install nodejs npm, then `npm ci` in test/Proxy.FunctionalTests/grpc-client");

    /// <summary>
    /// h2spec has no Debian package and CI cannot build it, so it is skipped even in CI when missing.
    /// </summary>
    public static readonly InteropTool H2spec = new(
        "h2spec", "build h2spec from its public source (github.com/summerwind/h2spec) and put it on PATH",
        SkipInCiWhenMissing: true);

    /// <summary>True when the CI variable says we run under CI (missing tools then fail, not skip).</summary>
    public static bool IsCi =>
        string.Equals(Environment.GetEnvironmentVariable("CI"), "true", StringComparison.OrdinalIgnoreCase);

    /// <summary>Full path of the tool, or null when it is not on PATH.</summary>
    public string? Path => ExecutableLocator.Find(Command);

    /// <summary>The message used both for a skip and for a CI failure.</summary>
    public string MissingMessage => $"'{Command}' is not on PATH: {InstallHint}.";

    /// <summary>
    /// The skip reason for a test that needs this tool, or null when the test must run
    /// (tool present, or missing under CI so that the test fails loudly).
    /// </summary>
    public string? SkipReason() => SkipReason(isPresent: Path is not null, isCi: IsCi);

    /// <summary>The decision of <see cref="SkipReason()"/> for a given presence and environment.</summary>
    public string? SkipReason(bool isPresent, bool isCi)
    {
        if (isPresent)
        {
            return null;
        }

        return isCi && !SkipInCiWhenMissing ? null : MissingMessage;
    }

    /// <summary>Full path of the tool; throws with the install hint when missing (the CI failure path).</summary>
    public string Require() => Path ?? throw new InvalidOperationException(MissingMessage);
}
