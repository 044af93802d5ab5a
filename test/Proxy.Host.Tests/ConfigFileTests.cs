using System.Net;

namespace Proxy.Host.Tests;

/// <summary>`--config FILE`: a user's routes instead of the bundled ones, validated at startup, reloaded on change.</summary>
public sealed class ConfigFileTests
{
    [Fact]
    public async Task RunAsync_ConfigWithMissingCluster_ExitsOneNamingKeyAndFile()
    {
        using var folder = new TempFolder();
        var config = folder.Write("bad.json", """
            { "ReverseProxy": {
                "Routes": { "r1": { "ClusterId": "nope", "Match": { "Path": "/{**all}" } } },
                "Clusters": { "c1": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync(["--config", config, .. HostRunner.PortZeroArguments(folder)], error);

        Assert.Equal(1, exitCode);
        var message = error.ToString();
        Assert.Contains("ReverseProxy:Routes:r1:ClusterId: cluster 'nope' does not exist", message);
        Assert.Contains(config, message);
    }

    [Fact]
    public async Task RunAsync_ConfigFileMissing_ExitsOneNamingPath()
    {
        using var folder = new TempFolder();
        var missing = Path.Combine(folder.Path, "missing.json");
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync(["--config", missing, .. HostRunner.PortZeroArguments(folder)], error);

        Assert.Equal(1, exitCode);
        Assert.Contains(missing, error.ToString());
    }

    [Fact]
    public async Task StartAsync_ConfigWithoutDemoSection_DemoNotStartedAndOnlyUserRoutes()
    {
        using var folder = new TempFolder();
        var config = folder.Write("proxy.json", """
            { "ReverseProxy": {
                "Routes": { "api": { "ClusterId": "backend", "Match": { "PathPrefix": "/api" } } },
                "Clusters": { "backend": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);

        await using var runner = await HostRunner.StartAsync("--config", config);
        using var client = HostRunner.Http2Client();
        using var response = await client.GetAsync(new Uri(runner.Http, "/events"));

        Assert.Null(runner.Host.Demo);
        Assert.Equal(config, runner.Host.ConfigFile);
        Assert.Equal(HttpStatusCode.NotFound, response.StatusCode);
    }

    [Fact]
    public async Task ConfigFile_RouteAddedWhileRunning_ServedWithoutRestart()
    {
        using var folder = new TempFolder();
        const string Clusters = """
            "Clusters": { "demo-sse": { "Destinations": { "sse": { "Address": "http://127.0.0.1:5101/" } } } }
            """;
        var config = folder.Write("proxy.json", $$"""
            { "Demo": { "Enabled": true }, "ReverseProxy": {
                "Routes": { "home": { "ClusterId": "demo-sse", "Match": { "Path": "/" } } }, {{Clusters}} } }
            """);
        await using var runner = await HostRunner.StartAsync("--config", config);
        using var client = HostRunner.Http2Client();
        var events = new Uri(runner.Http, "/events?count=1");
        using (var before = await client.GetAsync(events, HttpCompletionOption.ResponseHeadersRead))
        {
            Assert.NotNull(runner.Host.Demo);
            Assert.Equal(HttpStatusCode.NotFound, before.StatusCode);
        }

        File.WriteAllText(config, $$"""
            { "Demo": { "Enabled": true }, "ReverseProxy": {
                "Routes": { "home": { "ClusterId": "demo-sse", "Match": { "Path": "/" } },
                            "events": { "ClusterId": "demo-sse", "Match": { "Path": "/events" } } }, {{Clusters}} } }
            """);

        // The file watcher reports the change asynchronously: wait for the new route, up to a deadline.
        var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(15);
        HttpStatusCode status;
        do
        {
            using var after = await client.GetAsync(events, HttpCompletionOption.ResponseHeadersRead);
            status = after.StatusCode;
            if (status != HttpStatusCode.OK)
            {
                await Task.Delay(100);
            }
        }
        while (status != HttpStatusCode.OK && DateTime.UtcNow < deadline);

        Assert.Equal(HttpStatusCode.OK, status);
    }

    [Fact]
    public async Task RunAsync_InvalidJson_ErrorCountsLinesFromOne()
    {
        using var folder = new TempFolder();
        var config = folder.Write("bad.json", "{\n  \"ReverseProxy\": {\n    \"Routes\": oops\n  }\n}\n");
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync(["--config", config, .. HostRunner.PortZeroArguments(folder)], error);

        Assert.Equal(1, exitCode);
        var message = error.ToString();
        Assert.Contains($"Config file '{config}' is not valid JSON: line 3, column 15:", message);
        Assert.DoesNotContain("LineNumber", message);
    }

    [Fact]
    public async Task ConfigFile_InvalidJsonOnReload_LoggedWithReasonAndLastGoodConfigKept()
    {
        using var folder = new TempFolder();
        var config = folder.Write("proxy.json", """
            { "ReverseProxy": {
                "Routes": { "api": { "ClusterId": "backend", "Match": { "PathPrefix": "/api" } } },
                "Clusters": { "backend": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """);
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, "--config", config);
        using var client = HostRunner.Http2Client();

        File.WriteAllText(config, "{ \"ReverseProxy\": {\n  \"Routes\": { \"api\": ");

        // The file watcher reports the change asynchronously; the bound only turns a missing log line into a failure.
        var logged = await logs.WaitForAsync(m => m.Contains("was not reloaded", StringComparison.Ordinal)).WaitAsync(TimeSpan.FromSeconds(30));
        Assert.Contains($"Config file '{config}' was not reloaded: line 2,", logged);
        Assert.Contains("the last good configuration stays in use", logged);
        using var response = await client.GetAsync(new Uri(runner.Http, "/api/x"));
        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode); // still routed (to a closed port), not 404
    }

    [Theory]
    [InlineData("proxy")]
    [InlineData("kestrel")]
    public async Task RunAsync_UrlPortOutOfRange_ExitsOneNamingOptionAndValue(string server)
    {
        using var folder = new TempFolder();
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--Host:Server={server}", "--urls=http://127.0.0.1:70000"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains("--urls 'http://127.0.0.1:70000': port 70000 is out of range (0-65535).", error.ToString());
    }

    [Fact]
    public async Task RunAsync_DemoUrlNotAUrl_ExitsOneNamingKey()
    {
        using var folder = new TempFolder();
        var config = folder.Write("proxy.json", """{ "Demo": { "Enabled": true }, "ReverseProxy": { } }""");
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), "--config", config, "--Demo:SseUrl=http://127.0.0.1:sse"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains("--Demo:SseUrl 'http://127.0.0.1:sse': port 'sse' is not a number.", error.ToString());
    }

    [Fact]
    public void BundledConfigPath_RunFromProjectBuildOutput_ProjectFile()
    {
        using var folder = new TempFolder();
        var project = Directory.CreateDirectory(Path.Combine(folder.Path, "src", "Proxy.Host")).FullName;
        var source = Path.Combine(project, HostConfiguration.BundledConfigFileName);
        File.WriteAllText(source, "{}");
        var output = Directory.CreateDirectory(Path.Combine(project, "bin", "Debug", "net10.0")).FullName;
        var elsewhere = Directory.CreateDirectory(Path.Combine(folder.Path, "installed")).FullName;

        Assert.Equal(source, HostConfiguration.BundledConfigPath(output + Path.DirectorySeparatorChar, project));
        Assert.Equal(Path.Combine(elsewhere, HostConfiguration.BundledConfigFileName), HostConfiguration.BundledConfigPath(elsewhere, project));
        Assert.Equal(Path.Combine(output, HostConfiguration.BundledConfigFileName), HostConfiguration.BundledConfigPath(output, projectDirectory: null));
    }
}
