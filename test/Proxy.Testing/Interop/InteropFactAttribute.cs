using Xunit;

namespace Proxy.Testing.Interop;

/// <summary>
/// A fact that needs external tools. xUnit 2 has no dynamic skip, so the skip is decided here,
/// at discovery: missing tool and not CI -> skipped with an install hint; missing tool under CI ->
/// the test runs and fails on <see cref="InteropTool.Require"/>.
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class InteropFactAttribute : FactAttribute
{
    public InteropFactAttribute(params string[] tools)
    {
        Skip = InteropSkip.For(tools);
    }
}

/// <summary>The theory form of <see cref="InteropFactAttribute"/>.</summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class InteropTheoryAttribute : TheoryAttribute
{
    public InteropTheoryAttribute(params string[] tools)
    {
        Skip = InteropSkip.For(tools);
    }
}

public static class InteropSkip
{
    /// <summary>Tools by command name, so attributes can name them with constants.</summary>
    public static InteropTool Lookup(string command) => command switch
    {
        "curl" => InteropTool.Curl,
        "nghttp" => InteropTool.Nghttp,
        "h2load" => InteropTool.H2load,
        "h2spec" => InteropTool.H2spec,
        "node" => InteropTool.Node,
        "chromium" => InteropTool.Chromium,
        _ => new InteropTool(command, $"install '{command}'"),
    };

    public static string? For(IEnumerable<string> tools)
    {
        var reasons = tools.Select(t => Lookup(t).SkipReason()).OfType<string>().ToArray();
        return reasons.Length == 0 ? null : string.Join(" ", reasons);
    }
}
