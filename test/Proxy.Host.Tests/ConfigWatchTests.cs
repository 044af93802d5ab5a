using System.Net;
using System.Text.RegularExpressions;

namespace Proxy.Host.Tests;

/// <summary>
/// The config files are watched in their own folders only: not the trees under them (which cost an inotify watch per
/// folder, and a wakeup per file written anywhere in them), and a change still reloads.
/// </summary>
public sealed partial class ConfigWatchTests
{
    private const string NoDemo = """{ "Demo": { "Enabled": false }, "ReverseProxy": { "Routes": {}, "Clusters": {} } }""";

    // A route to a port nothing listens on: routed, it answers 502; unknown, 404.
    private static string Routes(params string[] paths)
    {
        var routes = string.Join(", ", paths.Select(p => $"\"r{p.Trim('/')}\": {{ \"ClusterId\": \"closed\", \"Match\": {{ \"Path\": \"{p}\" }} }}"));
        return $$"""
            { "ReverseProxy": {
                "Routes": { {{routes}} },
                "Clusters": { "closed": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } } }
            """;
    }

    private static ProxyProcess StartIn(string workingDirectory, TempFolder certificates, string configFile,
        IReadOnlyDictionary<string, string>? environment = null) =>
        ProxyProcess.StartIn(workingDirectory, environment, Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"),
            "--config", configFile, "--urls=http://127.0.0.1:0", "--Admin:Url=http://127.0.0.1:0",
            $"--ProxyServer:DevelopmentCertificateDirectory={certificates.Path}",
            "--Logging:LogLevel:Default=Warning", "--Logging:LogLevel:Proxy.Host=Information",
            "--Logging:LogLevel:Proxy.Forwarding=Information");

    // The reload's end, as the forwarding layer logs it (the route count tells one config from another). The bound only
    // turns a reload that never comes into a failure.
    private static Task<string> AppliedAsync(ProxyProcess proxy, int routes) =>
        proxy.WaitForLineAsync($"Reverse proxy configuration applied: {routes} routes,").WaitAsync(TimeSpan.FromSeconds(60));

    private static async Task<Uri> ListeningAsync(ProxyProcess proxy)
    {
        var line = await proxy.WaitForLineAsync("Proxy listening on ");
        return new Uri(ListeningAddress().Match(line).Value);
    }

    [GeneratedRegex(@"http://127\.0\.0\.1:\d+/")]
    private static partial Regex ListeningAddress();

    private static void MakeTree(string root, int folders)
    {
        for (var i = 0; i < folders; i++)
        {
            Directory.CreateDirectory(Path.Combine(root, $"a{i % 10}", $"b{i}"));
        }
    }

    // Every inotify watch the process holds, over all its inotify instances (Linux: one "inotify wd:" line each).
    private static int InotifyWatches(int pid) =>
        Directory.GetFiles($"/proc/{pid}/fdinfo").Sum(fd =>
        {
            try
            {
                return File.ReadLines(fd).Count(line => line.StartsWith("inotify wd:", StringComparison.Ordinal));
            }
            catch (IOException)
            {
                return 0; // a descriptor closed between the listing and the read
            }
        });

    [Fact]
    public async Task StartedInALargeTree_WatchesTheConfigFoldersOnly()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // inotify and /proc: what this counts is Linux's
        }

        using var current = new TempFolder();
        using var configs = new TempFolder();
        using var certificates = new TempFolder();
        MakeTree(current.Path, 300);
        MakeTree(configs.Path, 300);
        current.Write("appsettings.json", "{}");
        var config = configs.Write("proxy.json", NoDemo);
        using var proxy = StartIn(current.Path, certificates, config);

        await ListeningAsync(proxy);

        // The config file's folder, the current folder's appsettings*.json and the certificate folder: one watch each at
        // most. A watch of either tree would take 311 (the folder, its 10 and their 300).
        Assert.InRange(InotifyWatches(proxy.Process.Id), 1, 8);
    }

    [Fact]
    public async Task AppSettingsInTheCurrentFolder_EditedWhileRunning_IsReloaded()
    {
        using var current = new TempFolder();
        using var configs = new TempFolder();
        using var certificates = new TempFolder();
        var appSettings = current.Write("appsettings.json", Routes("/a"));
        var config = configs.Write("proxy.json", """{ "Demo": { "Enabled": false } }""");
        using var proxy = StartIn(current.Path, certificates, config);
        var address = await ListeningAsync(proxy);
        using var client = new HttpClient();
        using (var before = await client.GetAsync(new Uri(address, "/b")))
        {
            Assert.Equal(HttpStatusCode.NotFound, before.StatusCode);
        }

        File.WriteAllText(appSettings, Routes("/a", "/b"));

        await AppliedAsync(proxy, 2);
        using var after = await client.GetAsync(new Uri(address, "/b"));
        Assert.Equal(HttpStatusCode.BadGateway, after.StatusCode);
    }

    [Fact]
    public async Task AppSettingsSavedInvalid_ReportedAndTheFolderIsStillWatched()
    {
        // A reload that fails (invalid JSON) is reported, keeps the last good values and does not stop the folder's
        // watcher: the config file beside it, and the fixed appsettings.json after it, still reload.
        using var current = new TempFolder();
        using var certificates = new TempFolder();
        const string Cluster = """ "Clusters": { "closed": { "Destinations": { "d1": { "Address": "http://127.0.0.1:1/" } } } } """;
        var appSettings = current.Write("appsettings.json", """{ "ReverseProxy": { "Routes": { "a": { "ClusterId": "closed", "Match": { "Path": "/a" } } } } }""");
        var config = current.Write("proxy.json", $$"""{ "Demo": { "Enabled": false }, "ReverseProxy": { {{Cluster}} } }""");
        using var proxy = StartIn(current.Path, certificates, config);
        var address = await ListeningAsync(proxy);
        await AppliedAsync(proxy, 1);

        File.WriteAllText(appSettings, "{ \"ReverseProxy\": oops");
        // Reported as for the config file, and its last good values (route a) stay.
        var reported = await proxy.WaitForLineAsync("appsettings.json' was not reloaded").WaitAsync(TimeSpan.FromSeconds(60));
        Assert.Contains("the last good configuration stays in use", reported);
        File.WriteAllText(config, $$"""
            { "Demo": { "Enabled": false }, "ReverseProxy": { {{Cluster}},
                "Routes": { "p1": { "ClusterId": "closed", "Match": { "Path": "/p1" } },
                            "p2": { "ClusterId": "closed", "Match": { "Path": "/p2" } } } } }
            """);
        await AppliedAsync(proxy, 3); // a, and the config file's two
        File.WriteAllText(appSettings, """
            { "ReverseProxy": { "Routes": { "a": { "ClusterId": "closed", "Match": { "Path": "/a" } },
                                            "b": { "ClusterId": "closed", "Match": { "Path": "/b" } },
                                            "c": { "ClusterId": "closed", "Match": { "Path": "/c" } } } } }
            """);

        await AppliedAsync(proxy, 5);
        using var client = new HttpClient();
        using var response = await client.GetAsync(new Uri(address, "/c"));
        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
    }

    [Fact]
    public async Task PollingWatcherAsked_EveryChangeIsReloaded()
    {
        // DOTNET_USE_POLLING_FILE_WATCHER: the files are polled (every 4 s), and not only until the first reload.
        using var current = new TempFolder();
        using var configs = new TempFolder();
        using var certificates = new TempFolder();
        var config = configs.Write("proxy.json", Routes("/a"));
        using var proxy = StartIn(current.Path, certificates, config, new Dictionary<string, string> { ["DOTNET_USE_POLLING_FILE_WATCHER"] = "1" });
        await ListeningAsync(proxy);
        await AppliedAsync(proxy, 1);

        File.WriteAllText(config, Routes("/a", "/b"));
        await AppliedAsync(proxy, 2);
        File.WriteAllText(config, Routes("/a", "/b", "/c"));

        await AppliedAsync(proxy, 3);
        if (OperatingSystem.IsLinux())
        {
            Assert.Equal(0, InotifyWatches(proxy.Process.Id)); // polled from first to last: no watcher was ever made
        }
    }

    [Fact]
    public async Task ConfigFileBehindALinkSwappedAsKubernetesDoes_IsReloaded()
    {
        if (OperatingSystem.IsWindows())
        {
            return; // symbolic links need a privilege there
        }

        // A ConfigMap volume: proxy.json -> ..data/proxy.json, ..data -> ..2026_1; an update writes ..2026_2, then renames
        // a new link over ..data. Only "..data" appears in the folder's events.
        using var mount = new TempFolder();
        using var current = new TempFolder();
        using var certificates = new TempFolder();
        Directory.CreateDirectory(Path.Combine(mount.Path, "..2026_1"));
        File.WriteAllText(Path.Combine(mount.Path, "..2026_1", "proxy.json"), Routes("/a"));
        File.CreateSymbolicLink(Path.Combine(mount.Path, "..data"), "..2026_1");
        File.CreateSymbolicLink(Path.Combine(mount.Path, "proxy.json"), Path.Combine("..data", "proxy.json"));
        using var proxy = StartIn(current.Path, certificates, Path.Combine(mount.Path, "proxy.json"));
        var address = await ListeningAsync(proxy);
        using var client = new HttpClient();
        using (var before = await client.GetAsync(new Uri(address, "/b")))
        {
            Assert.Equal(HttpStatusCode.NotFound, before.StatusCode);
        }

        Directory.CreateDirectory(Path.Combine(mount.Path, "..2026_2"));
        File.WriteAllText(Path.Combine(mount.Path, "..2026_2", "proxy.json"), Routes("/a", "/b"));
        File.CreateSymbolicLink(Path.Combine(mount.Path, "..data_tmp"), "..2026_2");
        // rename(2) replaces the link itself in one step (File.Move follows a link to a folder and refuses it).
        Assert.Equal(0, Rename(Path.Combine(mount.Path, "..data_tmp"), Path.Combine(mount.Path, "..data")));

        await AppliedAsync(proxy, 2);
        using var after = await client.GetAsync(new Uri(address, "/b"));
        Assert.Equal(HttpStatusCode.BadGateway, after.StatusCode);
    }

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "rename", SetLastError = true)]
    private static extern int Rename(string from, string to);
}

/// <summary>FolderFileProvider on its own: a change callback that throws does not stop the watching.</summary>
public sealed class FolderFileProviderTests
{
    [Fact]
    public async Task ACallbackThatThrows_LaterChangesAreStillSignalled()
    {
        using var folder = new TempFolder();
        var file = folder.Write("settings.json", "1");
        using var provider = new FolderFileProvider(folder.Path);
        var first = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        provider.Watch("settings.json").RegisterChangeCallback(_ =>
        {
            first.TrySetResult();
            throw new InvalidOperationException("a reload that fails"); // e.g. a value an options class refuses
        }, null);

        File.WriteAllText(file, "2");
        await first.Task.WaitAsync(TimeSpan.FromSeconds(30)); // the bound only turns a missing signal into a failure
        var second = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        provider.Watch("settings.json").RegisterChangeCallback(_ => second.TrySetResult(), null);
        File.WriteAllText(file, "3");

        await second.Task.WaitAsync(TimeSpan.FromSeconds(30));
    }
}
