using System.Diagnostics;
using System.Text;

namespace Proxy.Host.Tests;

/// <summary>
/// The packages work for someone outside this repo: pack Proxy.Server (with its engine packages) and
/// Proxy.Forwarding into a folder feed, build a fresh web project that references them from that feed,
/// run it, and forward a request through it. Slow (tens of seconds): one test. Every file it makes
/// (packages, build outputs, the consumer, its NuGet cache) lives in one temp folder, deleted at the end.
/// </summary>
public sealed class PackageConsumptionTest
{
    private static readonly string[] PackedProjects =
    [
        "src/Proxy.Codecs/Proxy.Codecs.csproj",
        "src/Proxy.Buffers/Proxy.Buffers.csproj",
        "src/Proxy.Protocols/Proxy.Protocols.csproj",
        "src/Proxy.Transport/Proxy.Transport.csproj",
        "src/Proxy.Server/Proxy.Server.csproj",
        "src/Proxy.Forwarding/Proxy.Forwarding.csproj",
    ];

    [Fact]
    public async Task Packages_ConsumedFromFolderFeed_ConsumerBuildsRunsAndForwards()
    {
        var repo = FindRepositoryRoot();
        using var temp = new TempFolder("proxy-package-test");
        var feed = Path.Combine(temp.Path, "feed");
        var consumer = Path.Combine(temp.Path, "consumer");
        Directory.CreateDirectory(consumer);

        // Step 1: pack the six projects in one build (a solution filter), outputs under temp, not the repo.
        var filter = temp.Write("packages.slnf", $$"""
            { "solution": { "path": "{{Path.Combine(repo, "Proxy.sln").Replace("\\", "\\\\")}}",
                "projects": [ {{string.Join(", ", PackedProjects.Select(p => $"\"{p}\""))}} ] } }
            """);
        var pack = await RunAsync(repo, null, TimeSpan.FromMinutes(4),
            "pack", filter, "-o", feed, "--artifacts-path", Path.Combine(temp.Path, "artifacts"), "-p:Version=0.0.1-test");
        Assert.True(pack.ExitCode == 0, pack.Output);
        foreach (var id in new[] { "Proxy.Server", "Proxy.Forwarding", "Proxy.Protocols", "Proxy.Transport", "Proxy.Codecs", "Proxy.Buffers" })
        {
            Assert.True(File.Exists(Path.Combine(feed, $"{id}.0.0.1-test.nupkg")), $"{id} was not packed:\n{pack.Output}");
        }

        // Step 2: a consumer that knows nothing of the repo: its own nuget.config, NuGet cache and SDK defaults.
        WriteConsumer(consumer, feed);
        var cache = new Dictionary<string, string> { ["NUGET_PACKAGES"] = Path.Combine(temp.Path, "nuget-packages") };
        var build = await RunAsync(consumer, cache, TimeSpan.FromMinutes(3), "build", "-c", "Release");
        Assert.True(build.ExitCode == 0, build.Output);

        // Step 3: run it; it prints its address, then forwards /fwd/* to its own /hello.
        var dll = Path.Combine(consumer, "bin", "Release", "net10.0", "Consumer.dll");
        using var app = StartProcess(consumer, cache, dll, "--urls", "http://127.0.0.1:0");
        try
        {
            var address = await app.WaitForLineAsync("LISTENING ", TimeSpan.FromSeconds(30));
            using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(10) };

            var direct = await client.GetStringAsync(address.TrimEnd('/') + "/hello");
            var forwarded = await client.GetStringAsync(address.TrimEnd('/') + "/fwd/hello");

            Assert.Equal("hello from the consumer", direct);
            Assert.Equal("hello from the consumer", forwarded);
        }
        finally
        {
            app.Stop();
        }
    }

    private static void WriteConsumer(string folder, string feed)
    {
        File.WriteAllText(Path.Combine(folder, "nuget.config"), $"""
            <?xml version="1.0" encoding="utf-8"?>
            <configuration>
              <packageSources>
                <clear />
                <add key="local-feed" value="{feed}" />
                <add key="machine" value="/opt/nuget/packages" />
                <add key="nuget.org" value="https://api.nuget.org/v3/index.json" protocolVersion="3" />
              </packageSources>
            </configuration>
            """);
        File.WriteAllText(Path.Combine(folder, "Consumer.csproj"), """
            <Project Sdk="Microsoft.NET.Sdk.Web">
              <PropertyGroup>
                <TargetFramework>net10.0</TargetFramework>
                <Nullable>enable</Nullable>
                <ImplicitUsings>enable</ImplicitUsings>
                <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
              </PropertyGroup>
              <ItemGroup>
                <PackageReference Include="Proxy.Server" Version="0.0.1-test" />
                <PackageReference Include="Proxy.Forwarding" Version="0.0.1-test" />
              </ItemGroup>
            </Project>
            """);
        File.WriteAllText(Path.Combine(folder, "Program.cs"), """
            using Proxy.Forwarding;
            using Proxy.Forwarding.Configuration;

            var builder = WebApplication.CreateBuilder(args);
            builder.Logging.ClearProviders();
            builder.WebHost.UseProxyServer(options => options.Http2.MaxConcurrentStreams = 50);
            builder.Services.AddProxyForwarding().LoadFromMemory([], []);
            var app = builder.Build();
            app.MapGet("/hello", () => "hello from the consumer");
            app.MapProxyForwarding();
            await app.StartAsync();

            var self = app.Urls.First();
            app.Services.GetRequiredService<InMemoryConfigProvider>().Update(
                [new RouteConfig
                {
                    RouteId = "fwd", ClusterId = "self", Match = new RouteMatch { PathPrefix = "/fwd" },
                    Transforms = [new Dictionary<string, string> { ["PathRemovePrefix"] = "/fwd" }],
                }],
                [new ClusterConfig
                {
                    ClusterId = "self",
                    Destinations = new Dictionary<string, DestinationConfig> { ["me"] = new() { Address = self } },
                }]);
            Console.WriteLine("LISTENING " + self);
            await app.WaitForShutdownAsync();
            """);
    }

    private static string FindRepositoryRoot()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "Proxy.sln")))
            {
                return dir.FullName;
            }
        }

        throw new InvalidOperationException($"Proxy.sln not found above {AppContext.BaseDirectory}.");
    }

    private static async Task<(int ExitCode, string Output)> RunAsync(string workingDirectory, Dictionary<string, string>? environment, TimeSpan timeout, params string[] arguments)
    {
        using var process = StartProcess(workingDirectory, environment, arguments);
        using var cts = new CancellationTokenSource(timeout);
        try
        {
            await process.Process.WaitForExitAsync(cts.Token);
        }
        catch (OperationCanceledException)
        {
            process.Stop();
            throw new TimeoutException($"dotnet {string.Join(' ', arguments)} did not finish within {timeout}:\n{process.Output}");
        }

        return (process.Process.ExitCode, $"dotnet {string.Join(' ', arguments)}\n{process.Output}");
    }

    private static ChildProcess StartProcess(string workingDirectory, Dictionary<string, string>? environment, params string[] arguments)
    {
        var start = new ProcessStartInfo(DotnetPath())
        {
            WorkingDirectory = workingDirectory,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        foreach (var argument in arguments)
        {
            start.ArgumentList.Add(argument);
        }

        // The test runs under `dotnet test`, whose MSBuild variables would steer the child builds.
        foreach (var name in start.Environment.Keys.Where(k => k.StartsWith("MSBuild", StringComparison.OrdinalIgnoreCase)).ToList())
        {
            start.Environment.Remove(name);
        }

        start.Environment["DOTNET_CLI_TELEMETRY_OPTOUT"] = "1";
        start.Environment["DOTNET_NOLOGO"] = "1";
        start.Environment["DOTNET_SKIP_FIRST_TIME_EXPERIENCE"] = "1";
        foreach (var (name, value) in environment ?? [])
        {
            start.Environment[name] = value;
        }

        return new ChildProcess(Process.Start(start)!);
    }

    /// <summary>The dotnet that runs this test (so the child uses the same SDK install).</summary>
    private static string DotnetPath() =>
        Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host && File.Exists(host) ? host : "dotnet";

    /// <summary>A started process whose output is collected; lines are also offered to one waiter.</summary>
    // Owned by the test; output callbacks run on the process's reader threads, guarded by _lock.
    private sealed class ChildProcess : IDisposable
    {
        private readonly Lock _lock = new();
        private readonly StringBuilder _output = new();
        private (string Prefix, TaskCompletionSource<string> Found)? _waiter;

        public ChildProcess(Process process)
        {
            Process = process;
            process.OutputDataReceived += (_, e) => OnLine(e.Data);
            process.ErrorDataReceived += (_, e) => OnLine(e.Data);
            process.BeginOutputReadLine();
            process.BeginErrorReadLine();
        }

        public Process Process { get; }

        public string Output
        {
            get
            {
                lock (_lock)
                {
                    return _output.ToString();
                }
            }
        }

        public async Task<string> WaitForLineAsync(string prefix, TimeSpan timeout)
        {
            var found = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
            lock (_lock)
            {
                var earlier = _output.ToString().Split('\n').FirstOrDefault(l => l.StartsWith(prefix, StringComparison.Ordinal));
                if (earlier is not null)
                {
                    return earlier[prefix.Length..].Trim();
                }

                _waiter = (prefix, found);
            }

            var exited = Process.WaitForExitAsync();
            var first = await Task.WhenAny(found.Task, exited, Task.Delay(timeout));
            if (first != found.Task)
            {
                throw new InvalidOperationException($"No '{prefix}' line (exited: {Process.HasExited}):\n{Output}");
            }

            return await found.Task;
        }

        private void OnLine(string? line)
        {
            if (line is null)
            {
                return;
            }

            lock (_lock)
            {
                _output.AppendLine(line);
                if (_waiter is { } w && line.StartsWith(w.Prefix, StringComparison.Ordinal))
                {
                    w.Found.TrySetResult(line[w.Prefix.Length..].Trim());
                    _waiter = null;
                }
            }
        }

        public void Stop()
        {
            if (!Process.HasExited)
            {
                // Only the process this test started (and its children), by its handle.
                Process.Kill(entireProcessTree: true);
                Process.WaitForExit(10_000);
            }
        }

        public void Dispose()
        {
            Stop();
            Process.Dispose();
        }
    }
}
