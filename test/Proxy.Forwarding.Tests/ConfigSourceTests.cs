using Microsoft.Extensions.Configuration;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Tests;

/// <summary>Validation messages name the configuration source of their key.</summary>
public sealed class ConfigSourceTests : IDisposable
{
    private readonly string _directory = Path.Combine(Path.GetTempPath(), "proxy-config-source-" + Guid.NewGuid().ToString("N"));

    public ConfigSourceTests() => Directory.CreateDirectory(_directory);

    public void Dispose() => Directory.Delete(_directory, recursive: true);

    private (IConfigurationRoot Root, string Path) Build(string json, params string[] commandLine)
    {
        var path = Path.Combine(_directory, "proxy.json");
        File.WriteAllText(path, json);
        var root = new ConfigurationBuilder().AddJsonFile(path).AddCommandLine(commandLine).Build();
        return (root, path);
    }

    private const string Json = """
        { "ReverseProxy": {
            "Routes": { "r1": { "ClusterId": "x" } },
            "Clusters": { "c1": { "Destinations": { "d1": { "Health": "http://h/" } } } } } }
        """;

    [Fact]
    public void Annotate_KeyFromJsonFile_NamesFile()
    {
        var (root, path) = Build(Json);

        var message = ConfigurationSourceLocator.Annotate(root, "ReverseProxy:Routes:r1:ClusterId: cluster 'x' does not exist.");

        Assert.Equal($"ReverseProxy:Routes:r1:ClusterId: cluster 'x' does not exist. (in {path})", message);
    }

    [Fact]
    public void Annotate_KeyOverriddenOnCommandLine_NamesCommandLine()
    {
        var (root, _) = Build(Json, "--ReverseProxy:Routes:r1:ClusterId=y");

        var message = ConfigurationSourceLocator.Annotate(root, "ReverseProxy:Routes:r1:ClusterId: cluster 'y' does not exist.");

        Assert.EndsWith("(in the command line)", message);
    }

    [Fact]
    public void Annotate_MissingValue_NamesFileOfNearestParent()
    {
        var (root, path) = Build(Json);

        var message = ConfigurationSourceLocator.Annotate(root, "ReverseProxy:Clusters:c1:Destinations:d1:Address: is required.");

        Assert.EndsWith($"(in {path})", message);
    }

    [Fact]
    public void Annotate_KeyNoSourceHas_Unchanged()
    {
        var root = new ConfigurationBuilder().AddInMemoryCollection([]).Build();

        var message = ConfigurationSourceLocator.Annotate(root, "Other:Routes:r1:ClusterId: is required.");

        Assert.Equal("Other:Routes:r1:ClusterId: is required.", message);
    }
}
