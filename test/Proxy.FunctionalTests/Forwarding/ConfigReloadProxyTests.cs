using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding;
using Proxy.Forwarding.Configuration;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// The proxy reads its routes from a real JSON file on disk with reloadOnChange, the way a deployed proxy runs,
/// on Kestrel and on our server: edits apply without a restart, a broken file keeps the last good routes.
/// </summary>
public sealed class ConfigReloadProxyTests : IAsyncLifetime
{
    private static readonly TimeSpan s_bound = TimeSpan.FromSeconds(10);
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-reload-").FullName;
    private TestHost? _backend;

    public static TheoryData<ServerKind> Servers => new(Enum.GetValues<ServerKind>());

    public async Task InitializeAsync() =>
        _backend = await TestHost.StartAsync(ServerKind.Kestrel, app =>
        {
            app.MapGet("/a", () => "route a");
            app.MapGet("/b", () => "route b");
        }, https: false);

    public async Task DisposeAsync()
    {
        await _backend!.DisposeAsync();
        Directory.Delete(_directory, recursive: true);
    }

    private string Json(params string[] routes) => $$"""
        {
          "ReverseProxy": {
            "Routes": { {{string.Join(", ", routes.Select(r => $$"""
                "{{r}}": { "ClusterId": "c1", "Match": { "Path": "/{{r}}" } }
                """))}} },
            "Clusters": { "c1": { "Destinations": { "d1": { "Address": "{{_backend!.HttpAddress}}" } } } }
          }
        }
        """;

    /// <summary>Completes when the JSON provider failed to parse the file (it then keeps its data and raises no reload).</summary>
    private readonly TaskCompletionSource _fileRejected = new(TaskCreationOptions.RunContinuationsAsynchronously);

    private async Task<(TestHost Proxy, string Path)> StartProxyAsync(ServerKind kind, string json)
    {
        var path = Path.Combine(_directory, $"proxy-{kind}.json");
        await File.WriteAllTextAsync(path, json);
        var proxy = await TestHost.StartAsync(kind, app => app.MapProxyForwarding(), https: true, configureBuilder: b =>
        {
            // Observes the failure only: Ignore stays false, so the provider behaves exactly as by default.
            b.Configuration.SetFileLoadExceptionHandler(_ => _fileRejected.TrySetResult());
            b.Configuration.AddJsonFile(path, optional: false, reloadOnChange: true);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        });
        return (proxy, path);
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task RouteAddedToFile_ServedWithoutRestart(ServerKind kind)
    {
        var (proxy, path) = await StartProxyAsync(kind, Json("a"));
        await using var _ = proxy;
        using var client = TestClients.Create(proxy, HttpTransport.Http2Tls);
        var manager = proxy.App.Services.GetRequiredService<ProxyStateManager>();
        using (var before = await client.GetAsync("/b"))
        {
            Assert.Equal(HttpStatusCode.NotFound, before.StatusCode);
        }

        var attempt = manager.NextReloadAttempt;
        await File.WriteAllTextAsync(path, Json("a", "b"));
        await attempt.WaitAsync(s_bound);

        Assert.Null(manager.LastReloadError);
        Assert.Equal("route b", await client.GetStringAsync("/b"));
        Assert.Equal("route a", await client.GetStringAsync("/a"));
    }

    [Theory]
    [InlineData(ServerKind.Kestrel, "syntax")]
    [InlineData(ServerKind.ProxyServer, "syntax")]
    [InlineData(ServerKind.Kestrel, "unknown-cluster")]
    [InlineData(ServerKind.ProxyServer, "unknown-cluster")]
    public async Task BrokenFile_OldRoutesKept(ServerKind kind, string breakage)
    {
        var (proxy, path) = await StartProxyAsync(kind, Json("a"));
        await using var _ = proxy;
        using var client = TestClients.Create(proxy, HttpTransport.Http2Tls);
        var manager = proxy.App.Services.GetRequiredService<ProxyStateManager>();
        var attempt = manager.NextReloadAttempt;

        var broken = breakage == "syntax"
            ? Json("a", "b")[..^20] // truncated mid-object, as an editor saving half a file would leave it
            : Json("a", "b").Replace("\"ClusterId\": \"c1\", \"Match\": { \"Path\": \"/b\" }", "\"ClusterId\": \"nope\", \"Match\": { \"Path\": \"/b\" }");
        await File.WriteAllTextAsync(path, broken);
        if (breakage == "syntax")
        {
            // The JSON provider rejects the file before the proxy sees anything: no reload reaches the proxy.
            await _fileRejected.Task.WaitAsync(s_bound);
            Assert.False(attempt.IsCompleted);
        }
        else
        {
            // Valid JSON, invalid proxy config: the proxy itself rejects it and says why.
            await attempt.WaitAsync(s_bound);
            Assert.Contains("cluster 'nope' does not exist", manager.LastReloadError);
        }

        Assert.Equal("route a", await client.GetStringAsync("/a"));
        using var b = await client.GetAsync("/b");
        Assert.Equal(HttpStatusCode.NotFound, b.StatusCode);
    }
}
