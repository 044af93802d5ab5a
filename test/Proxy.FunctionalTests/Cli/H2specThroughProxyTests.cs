using System.Xml.Linq;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Proxy.Forwarding;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;
using Xunit.Abstractions;

namespace Proxy.FunctionalTests.Cli;

/// <summary>
/// h2spec against the proxy on our server (native relay) in front of a Kestrel backend, once per backend protocol
/// (HTTP/1.1 and h2c): the proxy must be as conformant as the server alone, and h2spec's abuse must not damage its
/// backend connections (the first version reset streams the backend had never seen and lost them). After each run a
/// plain request through the same route must still succeed, so a run of 502s cannot pass as conformance.
/// </summary>
[Collection(SerialCollection.Name)]
public sealed class H2specThroughProxyTests(ITestOutputHelper output) : IAsyncLifetime
{
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-h2spec-relay-").FullName;
    private TestHost? _backend;
    private TestHost? _proxy;
    private TestHost? _directProxy;

    public async Task InitializeAsync()
    {
        _backend = await TestHost.StartAsync(ServerKind.Kestrel, app => app.Run(async ctx =>
        {
            // Drain first (see HelloAppFixture): answering early would race h2spec's errors on an open stream.
            await ctx.Request.Body.CopyToAsync(Stream.Null);
            await ctx.Response.WriteAsync("through " + ctx.Request.Protocol);
        }), https: false);
        var keys = new Dictionary<string, string?>
        {
            ["ReverseProxy:Routes:h1:ClusterId"] = "h1",
            ["ReverseProxy:Routes:h1:Match:Path"] = "/h1/{**rest}",
            ["ReverseProxy:Routes:h2:ClusterId"] = "h2",
            ["ReverseProxy:Routes:h2:Match:Path"] = "/h2/{**rest}",
            ["ReverseProxy:Clusters:h1:Destinations:d:Address"] = _backend.HttpAddress.ToString(),
            ["ReverseProxy:Clusters:h2:Destinations:d:Address"] = _backend.H2cAddress.ToString(),
            ["ReverseProxy:Clusters:h2:HttpRequest:Version"] = "2",
            ["ReverseProxy:Clusters:h2:HttpRequest:VersionPolicy"] = "RequestVersionExact",
        };
        _proxy = await TestHost.StartAsync(ServerKind.ProxyServer, app => app.MapProxyForwarding(), https: true, configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(keys);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        });
        // The same proxy with the direct path on: the requests skip the pipeline, and the answers must not change.
        _directProxy = await TestHost.StartAsync(ServerKind.ProxyServer, app => app.MapProxyForwarding(), https: true, configureBuilder: b =>
        {
            b.Configuration.AddInMemoryCollection(keys);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            Proxy.Relay.NativeRelayExtensions.AddDirectPath(b.Services);
        });
    }

    public static TheoryData<string, H2specTests.Mode, bool> Cases()
    {
        var data = new TheoryData<string, H2specTests.Mode, bool>();
        foreach (var direct in new[] { false, true })
        {
            foreach (var backend in new[] { "h1", "h2" })
            {
                data.Add(backend, H2specTests.Mode.CleartextStrict, direct);
                data.Add(backend, H2specTests.Mode.Tls, direct);
            }
        }

        return data;
    }

    [InteropTheory("h2spec")]
    [MemberData(nameof(Cases))]
    public async Task H2spec_ThroughTheRelay_AllCasesPassAndTheRouteStillWorks(string backend, H2specTests.Mode mode, bool direct)
    {
        var proxy = direct ? _directProxy! : _proxy!;
        var address = mode == H2specTests.Mode.Tls ? proxy.HttpsAddress! : proxy.H2cAddress;
        var report = Path.Combine(_directory, $"report-{backend}-{mode}-{(direct ? "direct" : "pipeline")}.xml");
        List<string> arguments = ["-h", "127.0.0.1", "-p", address.Port.ToString(), "-P", $"/{backend}/", "-j", report];
        arguments.Add(mode == H2specTests.Mode.Tls ? "-t" : "--strict");
        if (mode == H2specTests.Mode.Tls)
        {
            arguments.AddRange(["-k", "--strict"]);
        }

        var result = await ToolProcess.RunAsync(InteropTool.H2spec, arguments, TimeSpan.FromMinutes(4));

        Assert.True(File.Exists(report), "h2spec wrote no JUnit report\n" + result);
        var summary = H2specReport.Parse(XDocument.Load(report));
        output.WriteLine($"h2spec {mode} through the relay ({(direct ? "direct path" : "pipeline")}) to an {backend} backend: {summary}");
        Assert.True(summary.Total > 140, $"suspiciously few h2spec cases: {summary}\n{result}");
        Assert.True(summary.Failed.Count == 0, $"{summary}\nFailed cases:\n{string.Join("\n", summary.Failed)}");
        Assert.True(result.ExitCode == 0, result.ToString());

        using var client = TestClients.Create(proxy, mode == H2specTests.Mode.Tls ? HttpTransport.Http2Tls : HttpTransport.Http2Cleartext);
        var answer = await client.GetStringAsync($"/{backend}/after");
        Assert.Equal(backend == "h1" ? "through HTTP/1.1" : "through HTTP/2", answer);
    }

    public async Task DisposeAsync()
    {
        if (_proxy is not null)
        {
            await _proxy.DisposeAsync();
        }

        if (_directProxy is not null)
        {
            await _directProxy.DisposeAsync();
        }

        if (_backend is not null)
        {
            await _backend.DisposeAsync();
        }

        Directory.Delete(_directory, recursive: true);
    }
}
