using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>Hot reload from a real JSON file with reloadOnChange, the way a deployed proxy runs.</summary>
public sealed class FileReloadTests : IDisposable
{
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-forwarding-").FullName;

    public void Dispose() => Directory.Delete(_directory, recursive: true);

    private static string Json(string address, string clusterId = "c1") => $$"""
        {
          "ReverseProxy": {
            "Routes": { "r1": { "ClusterId": "{{clusterId}}", "Match": { "Path": "/{**catch-all}" } } },
            "Clusters": { "c1": { "Destinations": { "d1": { "Address": "{{address}}" } } } }
          }
        }
        """;

    private async Task<(TestApp Proxy, string Path)> StartAsync(string json)
    {
        var path = Path.Combine(_directory, "proxy.json");
        await File.WriteAllTextAsync(path, json);
        var proxy = await ProxyTestHost.StartProxyAsync(b =>
        {
            b.Configuration.AddJsonFile(path, optional: false, reloadOnChange: true);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding());
        return (proxy, path);
    }

    [Fact]
    public async Task JsonFileChanged_NewDestination_AppliedWithoutRestart()
    {
        await using var first = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("first")));
        await using var second = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("second")));
        var (proxy, path) = await StartAsync(Json(first.Url));
        await using var _ = proxy;
        using var http = proxy.CreateClient();
        Assert.Equal("first", await http.GetStringAsync("/"));
        var applied = Applied(proxy);

        await File.WriteAllTextAsync(path, Json(second.Url));
        await applied.WaitAsync(TimeSpan.FromSeconds(10));

        Assert.Equal("second", await http.GetStringAsync("/"));
    }

    [Fact]
    public async Task JsonFileChanged_InvalidConfig_LastGoodKept()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(c => c.Response.WriteAsync("ok")));
        var (proxy, path) = await StartAsync(Json(backend.Url));
        await using var _ = proxy;
        using var http = proxy.CreateClient();
        var manager = proxy.Services.GetRequiredService<ProxyStateManager>();
        var before = manager.Current;
        var attempt = manager.NextReloadAttempt;

        await File.WriteAllTextAsync(path, Json(backend.Url, clusterId: "nope"));
        await attempt.WaitAsync(TimeSpan.FromSeconds(10));

        Assert.Contains("ReverseProxy:Routes:r1:ClusterId: cluster 'nope' does not exist", manager.LastReloadError);
        Assert.Contains($"(in {path})", manager.LastReloadError);
        Assert.Same(before, manager.Current);
        Assert.Equal("ok", await http.GetStringAsync("/"));
    }

    private static Task Applied(TestApp proxy)
    {
        var done = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        proxy.Services.GetRequiredService<ProxyStateManager>().ChangeToken.RegisterChangeCallback(_ => done.TrySetResult(), null);
        return done.Task;
    }
}
