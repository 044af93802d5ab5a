using System.Net;
using System.Text.Json;
using Proxy.FunctionalTests.Hosting;
using Proxy.Load;
using Proxy.Load.Client;
using Proxy.Load.Protos;
using Proxy.Load.Server;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests.Load;

/// <summary>The benchmark backend of the load harness on both servers (port 0: HTTP/1.1, h2c, TLS).</summary>
// Shared by the cases of LoadHarnessSmokeTests; started once, stopped at the end.
public sealed class LoadBackendFixture : IAsyncLifetime
{
    private readonly Dictionary<ServerKind, BenchmarkServer> _servers = [];

    public BenchmarkServer this[ServerKind kind] => _servers[kind];

    public async Task InitializeAsync()
    {
        foreach (var (kind, name) in new[] { (ServerKind.ProxyServer, "proxy"), (ServerKind.Kestrel, "kestrel") })
        {
            var server = await BenchmarkServer.StartAsync(
                new ServeOptions { Server = name, HttpPort = 0, H2cPort = 0, HttpsPort = 0 }, logWarnings: false);
            _servers[kind] = server;
            await ReadyAsync(server);
        }
    }

    /// <summary>
    /// One request per endpoint before any run: the first TLS handshake of a cold process can take longer than a
    /// whole 1.5 s smoke run on a busy machine, and a run with no completed request is a failure.
    /// </summary>
    private static async Task ReadyAsync(BenchmarkServer server)
    {
        using var client = new HttpClient(new SocketsHttpHandler
        {
            SslOptions = { RemoteCertificateValidationCallback = static (_, _, _, _) => true },
        });
        foreach (var (address, version) in new[]
        {
            (server.HttpAddress, System.Net.HttpVersion.Version11),
            (server.H2cAddress!, System.Net.HttpVersion.Version20),
            (server.HttpsAddress!, System.Net.HttpVersion.Version20),
        })
        {
            using var request = new HttpRequestMessage(HttpMethod.Get, address) { Version = version, VersionPolicy = HttpVersionPolicy.RequestVersionExact };
            using var response = await client.SendAsync(request);
            response.EnsureSuccessStatusCode();
        }

        // And one gRPC call each over h2c and h2: the gRPC stacks of both sides compile on their first call.
        foreach (var address in new[] { server.H2cAddress!, server.HttpsAddress! })
        {
            using var connection = new GrpcNetConnection(address);
            var reply = await connection.Client.UnaryCallAsync(new SimpleRequest { ResponseSize = 3 });
            Assert.Equal(3, reply.Payload.Length);
        }
    }

    public async Task DisposeAsync()
    {
        foreach (var server in _servers.Values)
        {
            await server.DisposeAsync();
        }
    }
}

/// <summary>
/// A short run (~1.5 s, no warm-up) of every load scenario through the harness's own command line, so the
/// harness keeps working. Nothing here measures speed: each run must complete requests with zero errors, zero
/// lost SSE events and no reconnects, and append its JSON object.
/// </summary>
public sealed class LoadHarnessSmokeTests(LoadBackendFixture backend) : IClassFixture<LoadBackendFixture>, IDisposable
{
    private readonly string _json = Path.Combine(Path.GetTempPath(), $"proxy-load-smoke-{Guid.NewGuid():N}.jsonl");

    public enum Endpoint { H2c, Tls, Http1 }

    public static TheoryData<ServerKind, string, Endpoint, string[]> Runs => new()
    {
        // Grpc.Net.Client against Grpc.AspNetCore, as crank drives it: h2c and h2, C x S, request and response sizes.
        { ServerKind.ProxyServer, "grpcnet-unary", Endpoint.H2c, ["--streams", "8", "--payload", "100"] },
        { ServerKind.ProxyServer, "grpcnet-unary", Endpoint.Tls, ["--connections", "2", "--streams", "4", "--request-size", "10", "--response-size", "300"] },
        { ServerKind.ProxyServer, "grpcnet-serverstreaming", Endpoint.H2c, ["--streams", "4", "--payload", "1024"] },
        { ServerKind.ProxyServer, "grpcnet-pingpong", Endpoint.H2c, ["--streams", "4", "--payload", "100"] },
        { ServerKind.ProxyServer, "http-get", Endpoint.H2c, ["--streams", "4", "--size", "10240"] },
        { ServerKind.ProxyServer, "http-get", Endpoint.Http1, ["--http", "1.1", "--connections", "2", "--size", "100"] },
        { ServerKind.ProxyServer, "http-post", Endpoint.Tls, ["--streams", "4", "--size", "1024"] },
        { ServerKind.ProxyServer, "sse", Endpoint.H2c, ["--connections", "2", "--streams", "3", "--rate", "50"] },
        { ServerKind.Kestrel, "grpcnet-unary", Endpoint.H2c, ["--streams", "8"] },
        { ServerKind.Kestrel, "grpcnet-pingpong", Endpoint.Tls, ["--connections", "2", "--streams", "2", "--payload", "100"] },
        { ServerKind.Kestrel, "sse", Endpoint.Http1, ["--http", "1.1", "--streams", "2", "--rate", "50"] },
    };

    [Theory]
    [MemberData(nameof(Runs))]
    public async Task Run_Scenario_CompletesRequestsWithZeroErrorsAndWritesJson(ServerKind kind, string scenario, Endpoint endpoint, string[] extra)
    {
        var server = backend[kind];
        var url = endpoint switch
        {
            Endpoint.H2c => server.H2cAddress!,
            Endpoint.Tls => server.HttpsAddress!,
            _ => server.HttpAddress,
        };
        string[] args =
        [
            "run", "--scenario", scenario, "--url", url.ToString(), "--warmup", "0", "--duration", "1.5",
            "--label", kind.ToString(), "--target-pid", Environment.ProcessId.ToString(), "--json", _json,
            "--no-progress", "--no-header", .. extra,
        ];

        var exitCode = await LoadProgram.MainAsync(args);

        var lines = await File.ReadAllLinesAsync(_json);
        var result = Assert.Single(lines);
        using var json = JsonDocument.Parse(result);
        var root = json.RootElement;
        var firstError = root.GetProperty("firstError").ToString();
        Assert.True(exitCode == 0, $"exit code {exitCode}; first error: {firstError}");
        Assert.Equal(scenario, root.GetProperty("scenario").GetString());
        Assert.Equal(kind.ToString(), root.GetProperty("label").GetString());
        Assert.True(root.GetProperty("requests").GetInt64() > 0, "no request completed");
        Assert.True(root.GetProperty("rps").GetDouble() > 0);
        Assert.Equal(0, root.GetProperty("errors").GetInt64());
        Assert.True(root.GetProperty("latencyMs").GetProperty("max").GetDouble() > 0);
        Assert.True(root.GetProperty("target").GetProperty("threads").GetInt32() > 0);
        if (scenario.StartsWith("grpcnet-", StringComparison.Ordinal))
        {
            // Every response carried the payload asked for: its bytes (message + 5-octet prefix) per request.
            var responseSize = root.GetProperty("size").GetInt32();
            Assert.True(root.GetProperty("bytesRead").GetInt64() >= root.GetProperty("requests").GetInt64() * (responseSize + 5));
        }

        if (scenario == "sse")
        {
            var sse = root.GetProperty("sse");
            Assert.True(sse.GetProperty("events").GetInt64() > 0);
            Assert.Equal(0, sse.GetProperty("lost").GetInt64());
            Assert.Equal(0, sse.GetProperty("reconnects").GetInt64());
        }
    }

    /// <summary>
    /// What HAProxy and nghttpx send the backend for a client that came over TLS: an h2c request with
    /// <c>:scheme https</c>. Kestrel and our server reset it (PROTOCOL_ERROR) unless AllowAlternateSchemes is set
    /// (the benchmark backend sets it on both), which made every gRPC-over-TLS run through those proxies fail.
    /// </summary>
    [Theory]
    [InlineData(ServerKind.Kestrel)]
    [InlineData(ServerKind.ProxyServer)]
    public async Task H2cRequest_ForwardedHttpsScheme_Answered(ServerKind kind)
    {
        var h2c = backend[kind].H2cAddress!;
        await using var peer = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, h2c.Port));
        await peer.HandshakeAsync();
        List<KeyValuePair<string, string>> headers =
        [
            new(":method", "GET"),
            new(":scheme", "https"),
            new(":authority", $"127.0.0.1:{h2c.Port}"),
            new(":path", "/size/10"),
        ];

        await peer.SendHeadersAsync(1, headers, endStream: true);
        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Status);
        Assert.Equal("xxxxxxxxxx", response.BodyText);
    }

    /// <summary>
    /// <c>/sse?every=S</c> (quiet streams, <c>run --every</c>): the backend sends an event every S seconds. Waits for two
    /// events themselves (no clock in the test) and checks their form and that they are consecutive.
    /// </summary>
    [Theory]
    [InlineData(ServerKind.Kestrel)]
    [InlineData(ServerKind.ProxyServer)]
    public async Task Sse_EveryQuery_SendsConsecutiveEvents(ServerKind kind)
    {
        var h2c = backend[kind].H2cAddress!;
        using var client = new HttpClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(h2c, "/sse?every=1"))
        {
            Version = System.Net.HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
        };
        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType?.MediaType);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
        // A guard against a hang, not a timing assertion: the events come a second apart.
        Task<string?> Line() => reader.ReadLineAsync().WaitAsync(TimeSpan.FromSeconds(30));

        Assert.Equal(": ok", await Line());
        Assert.Equal("", await Line());
        var (firstTime, firstSeq) = ParseEvent(await Line());
        Assert.Equal("", await Line());
        var (secondTime, secondSeq) = ParseEvent(await Line());

        Assert.True(firstSeq >= 1);
        Assert.Equal(firstSeq + 1, secondSeq);
        Assert.True(secondTime >= firstTime);

        static (long UnixNs, long Seq) ParseEvent(string? line)
        {
            Assert.NotNull(line);
            var fields = line.Split(' ');
            Assert.Equal(3, fields.Length);
            Assert.Equal("data:", fields[0]);
            return (long.Parse(fields[1]), long.Parse(fields[2]));
        }
    }

    [Theory]
    [InlineData("?every=10", 10_000)]
    [InlineData("?every=10&rate=5", 10_000)]
    [InlineData("?rate=4", 250)]
    [InlineData("?every=0&rate=4", 250)]
    [InlineData("?every=x", 100)]
    [InlineData("", 100)]
    public void SseInterval_EveryWinsOverRate_ElseTheDefaultRate(string query, int expectedMs)
    {
        var parsed = new Microsoft.AspNetCore.Http.QueryCollection(Microsoft.AspNetCore.WebUtilities.QueryHelpers.ParseQuery(query));
        Assert.Equal(TimeSpan.FromMilliseconds(expectedMs), BenchmarkEndpoints.SseInterval(parsed, defaultRate: 10));
    }

    [Fact]
    public void RunOptions_EveryAndRamp_ParsedAndChecked()
    {
        string[] common = ["--scenario", "sse", "--url", "https://127.0.0.1:1/", "--warmup", "30"];
        var options = LoadOptions.Parse([.. common, "--every", "10", "--ramp", "20"]);
        Assert.Equal(10, options.EverySeconds);
        Assert.Equal(20, options.RampSeconds);
        Assert.Equal(0, options.SizeColumn); // the rate column: no events-per-second figure with --every

        var plain = LoadOptions.Parse(common);
        Assert.Null(plain.EverySeconds);
        Assert.Equal(0, plain.RampSeconds);
        Assert.Equal(10, plain.SizeColumn);

        Assert.Contains("--every", Assert.Throws<UsageException>(() => LoadOptions.Parse([.. common, "--every", "10", "--rate", "2"])).Message);
        Assert.Contains("--every", Assert.Throws<UsageException>(() => LoadOptions.Parse(
            ["--scenario", "http-get", "--url", "http://127.0.0.1:1/", "--every", "10"])).Message);
        Assert.Contains("--ramp", Assert.Throws<UsageException>(() => LoadOptions.Parse([.. common, "--ramp", "31"])).Message);
        Assert.Contains("--every", Assert.Throws<UsageException>(() => LoadOptions.Parse([.. common, "--every", "0"])).Message);
    }

    [Fact]
    public void LatencyHistogram_UniformValues_PercentilesWithinThreePercentAndExactMax()
    {
        var histogram = new Proxy.Load.Metrics.LatencyHistogram();
        for (long v = 1; v <= 100_000; v++)
        {
            histogram.Record(v * 1_000); // 1 µs .. 100 ms, in ns
        }

        Assert.Equal(100_000, histogram.Count);
        Assert.Equal(100_000_000, histogram.Max);
        Assert.Equal(50_000_500.0, histogram.Mean, precision: 0);
        foreach (var (percentile, expected) in new[] { (50.0, 50_000_000.0), (90.0, 90_000_000.0), (99.0, 99_000_000.0) })
        {
            var value = histogram.ValueAtPercentile(percentile);
            Assert.InRange(value, expected, expected * 1.03);
        }
    }

    public void Dispose() => File.Delete(_json);
}
