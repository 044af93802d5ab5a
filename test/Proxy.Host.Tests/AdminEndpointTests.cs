using System.Net;
using System.Net.Http.Headers;
using System.Text.Json;

namespace Proxy.Host.Tests;

/// <summary>The standalone proxy's admin endpoint (Admin:*): health, readiness, metrics, config, the token rule.</summary>
public sealed class AdminEndpointTests
{
    [Theory]
    [InlineData("proxy")]
    [InlineData("kestrel")]
    public async Task Admin_OnEitherServer_ServesHealthReadinessAndPrometheusMetrics(string server)
    {
        var logs = new LogCapture();
        await using var runner = await HostRunner.StartAsync(logs, $"--Host:Server={server}", "--Logging:LogLevel:Proxy.Host=Information");
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(30) };
        using var proxied = await client.GetAsync(new Uri(runner.Http, "/"));
        Assert.Equal(HttpStatusCode.OK, proxied.StatusCode);

        var health = await client.GetAsync(new Uri(runner.Admin, "/healthz"));
        var ready = await client.GetAsync(new Uri(runner.Admin, "/readyz"));
        var metrics = await client.GetStringAsync(new Uri(runner.Admin, "/metrics"));

        Assert.Equal((HttpStatusCode.OK, "ok\n"), (health.StatusCode, await health.Content.ReadAsStringAsync()));
        Assert.Equal(HttpStatusCode.OK, ready.StatusCode);
        using var readiness = JsonDocument.Parse(await ready.Content.ReadAsStringAsync());
        Assert.True(readiness.RootElement.GetProperty("ready").GetBoolean());
        Assert.Contains("proxy_forwarding_requests_total{", metrics, StringComparison.Ordinal);
        Assert.Contains("http_server_request_duration_seconds_bucket{", metrics, StringComparison.Ordinal);
        Assert.Contains("dotnet_gc_collections_total", metrics, StringComparison.Ordinal);
        // Values that moved: the proxied request is counted, by the proxy and by the server it came through.
        Assert.True(Sum(metrics, "proxy_forwarding_requests_total{") >= 1, "proxy_forwarding_requests_total did not count the request");
        Assert.True(Sum(metrics, "kestrel_connection_duration_seconds_count{") + Sum(metrics, "kestrel_active_connections{") >= 1,
            "no kestrel.* connection instrument counted the client's connection");
        if (server == "proxy")
        {
            Assert.True(Sum(metrics, "proxy_server_connections_total{") >= 1, "proxy.server.connections did not count the client's connection");
        }
        Assert.DoesNotContain("http_route=\"/healthz\"", metrics, StringComparison.Ordinal); // admin requests are not traffic
        var started = await logs.WaitForAsync(m => m.StartsWith("Admin listening on ", StringComparison.Ordinal));
        Assert.Contains(runner.Admin.GetLeftPart(UriPartial.Authority), started, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Readyz_ClusterWithoutDestinations_503NamingIt()
    {
        await using var runner = await HostRunner.StartAsync("--config", WriteConfig("""
            { "ReverseProxy": {
                "Routes": { "r": { "ClusterId": "empty", "Match": { "Path": "/{**rest}" } } },
                "Clusters": { "empty": { } } } }
            """));
        using var client = new HttpClient();

        using var response = await client.GetAsync(new Uri(runner.Admin, "/readyz"));

        Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
        using var body = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        Assert.False(body.RootElement.GetProperty("ready").GetBoolean());
        Assert.Equal(["cluster 'empty' has no destinations"], body.RootElement.GetProperty("reasons").EnumerateArray().Select(r => r.GetString()));
    }

    [Fact]
    public async Task Config_RoutesAndClusters_SecretsRedacted()
    {
        await using var runner = await HostRunner.StartAsync("--config", WriteConfig("""
            { "ReverseProxy": {
                "Routes": { "api": { "ClusterId": "c", "Match": { "PathPrefix": "/api" },
                    "Transforms": [ { "RequestHeader": "Authorization", "Set": "Bearer hunter2" }, { "RequestHeader": "X-Trace", "Set": "visible" } ],
                    "Metadata": { "ApiToken": "tok-hunter2", "Team": "edge" } } },
                "Clusters": { "c": { "Destinations": { "d1": { "Address": "http://alice:hunter2@127.0.0.1:1/" } } } } } }
            """));
        using var client = new HttpClient();

        var json = await client.GetStringAsync(new Uri(runner.Admin, "/config"));

        Assert.DoesNotContain("hunter2", json, StringComparison.Ordinal);
        using var config = JsonDocument.Parse(json);
        var route = config.RootElement.GetProperty("Routes").GetProperty("api");
        Assert.Equal("/api", route.GetProperty("Match").GetProperty("PathPrefix").GetString());
        Assert.Equal("***", route.GetProperty("Transforms")[0].GetProperty("Set").GetString());
        Assert.Equal("visible", route.GetProperty("Transforms")[1].GetProperty("Set").GetString());
        Assert.Equal("***", route.GetProperty("Metadata").GetProperty("ApiToken").GetString());
        Assert.Equal("edge", route.GetProperty("Metadata").GetProperty("Team").GetString());
        var address = config.RootElement.GetProperty("Clusters").GetProperty("c").GetProperty("Destinations").GetProperty("d1").GetProperty("Address").GetString();
        Assert.Equal("http://***@127.0.0.1:1/", address);
    }

    [Fact]
    public async Task Token_Set_401WithoutItAndOkWithBearerOrQuery()
    {
        await using var runner = await HostRunner.StartAsync("--Admin:Token=s3cret");
        using var client = new HttpClient();

        using var without = await client.GetAsync(new Uri(runner.Admin, "/healthz"));
        using var wrong = new HttpRequestMessage(HttpMethod.Get, new Uri(runner.Admin, "/healthz")) { Headers = { Authorization = new AuthenticationHeaderValue("Bearer", "nope") } };
        using var wrongResponse = await client.SendAsync(wrong);
        using var bearer = new HttpRequestMessage(HttpMethod.Get, new Uri(runner.Admin, "/healthz")) { Headers = { Authorization = new AuthenticationHeaderValue("Bearer", "s3cret") } };
        using var bearerResponse = await client.SendAsync(bearer);
        using var query = await client.GetAsync(new Uri(runner.Admin, "/healthz?access_token=s3cret"));

        Assert.Equal(HttpStatusCode.Unauthorized, without.StatusCode);
        Assert.Equal("Bearer", without.Headers.WwwAuthenticate.Single().Scheme);
        Assert.Equal(HttpStatusCode.Unauthorized, wrongResponse.StatusCode);
        Assert.Equal(HttpStatusCode.OK, bearerResponse.StatusCode);
        Assert.Equal(HttpStatusCode.OK, query.StatusCode);
    }

    [Theory]
    [InlineData("http://0.0.0.0:0")]
    [InlineData("http://*:0")]
    public async Task RunAsync_NonLoopbackAdminWithoutToken_ExitsOneNamingTheKey(string url)
    {
        using var folder = new TempFolder();
        using var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--Admin:Url={url}"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains($"Admin:Url '{url}' is not a loopback address, so the admin endpoint needs a token: set Admin:Token", error.ToString(), StringComparison.Ordinal);
    }

    [Fact]
    public async Task RunAsync_AdminPortInUse_ExitsOneNamingAdminUrl()
    {
        using var taken = new System.Net.Sockets.TcpListener(IPAddress.Loopback, 0);
        taken.Start();
        var url = $"http://127.0.0.1:{((IPEndPoint)taken.LocalEndpoint).Port}";
        using var folder = new TempFolder();
        using var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--Admin:Url={url}"], error);

        Assert.Equal(1, exitCode);
        Assert.StartsWith($"The admin endpoint could not listen on {url} (", error.ToString(), StringComparison.Ordinal);
        Assert.Contains("set Admin:Url (port 0 picks a free one), or set Admin:Enabled=false.", error.ToString(), StringComparison.Ordinal);
    }

    [Fact]
    public async Task Admin_Disabled_NoAdminEndpoint()
    {
        await using var runner = await HostRunner.StartAsync("--Admin:Enabled=false");

        Assert.Null(runner.Host.Admin);
    }

    private static string WriteConfig(string json)
    {
        // The folder outlives the test: the host watches the file until it is disposed, and temp is cleaned by the OS.
        var folder = new TempFolder();
        return folder.Write("proxy.json", json);
    }

    /// <summary>Sum of the values of every series of a Prometheus text exposition whose line starts with <paramref name="prefix"/>.</summary>
    private static double Sum(string exposition, string prefix)
    {
        var sum = 0.0;
        foreach (var line in exposition.Split('\n'))
        {
            if (line.StartsWith(prefix, StringComparison.Ordinal))
            {
                var value = line[(line.LastIndexOf('}') + 1)..].Trim().Split(' ')[0];
                sum += double.Parse(value, System.Globalization.CultureInfo.InvariantCulture);
            }
        }
        return sum;
    }
}
