using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Transport.Certificates;

namespace Proxy.Host.Tests;

/// <summary>`Host:Server=kestrel`: the same host, config and forwarding on Kestrel instead of our server.</summary>
public sealed class KestrelHostTests
{
    [Fact]
    public async Task Kestrel_Http1H2cAndH2_ForwardedToBackendWithDevelopmentCertificate()
    {
        using var folder = new TempFolder();
        await using var backend = await StartBackendAsync();
        var config = folder.Write("proxy.json", $$"""
            { "ReverseProxy": {
                "Routes": { "all": { "ClusterId": "b", "Match": { "Path": "/{**rest}" } } },
                "Clusters": { "b": { "HttpRequest": { "Version": "1.1" }, "Destinations": { "d1": { "Address": "{{backend.Address}}" } } } } } }
            """);
        // Kestrel (.NET 10) serves h2c only on an HTTP/2-only endpoint, so HTTP/1.1 and h2c get a port each.
        var (h1, h2c, tls) = FreePorts();
        await using var host = await ProxyHostApp.StartAsync(
        [
            "--config", config,
            "--Host:Server=kestrel",
            "--Admin:Url=http://127.0.0.1:0",
            $"--Kestrel:Endpoints:h1:Url=http://127.0.0.1:{h1}",
            "--Kestrel:Endpoints:h1:Protocols=Http1",
            $"--Kestrel:Endpoints:h2c:Url=http://127.0.0.1:{h2c}",
            "--Kestrel:Endpoints:h2c:Protocols=Http2",
            $"--Kestrel:Endpoints:tls:Url=https://127.0.0.1:{tls}",
            $"--ProxyServer:DevelopmentCertificateDirectory={folder.Path}",
            "--Logging:LogLevel:Default=Warning",
        ]);
        X509Certificate2? presented = null;
        using var client = new HttpClient(new SocketsHttpHandler
        {
            SslOptions = { RemoteCertificateValidationCallback = (_, certificate, _, _) => { presented = new X509Certificate2(certificate!); return true; } },
        });

        var overHttp1 = await GetAsync(client, $"http://127.0.0.1:{h1}/hello", HttpVersion.Version11);
        var overH2c = await GetAsync(client, $"http://127.0.0.1:{h2c}/hello", HttpVersion.Version20);
        var overH2 = await GetAsync(client, $"https://127.0.0.1:{tls}/hello", HttpVersion.Version20);

        Assert.Equal(ProxyHostServer.Kestrel, host.Server);
        Assert.Equal((HttpVersion.Version11, "Kestrel", "backend: GET /hello"), overHttp1);
        Assert.Equal((HttpVersion.Version20, "Kestrel", "backend: GET /hello"), overH2c);
        Assert.Equal((HttpVersion.Version20, "Kestrel", "backend: GET /hello"), overH2);
        using var developmentCertificate = X509CertificateLoader.LoadPkcs12FromFile(Path.Combine(folder.Path, DevelopmentCertificate.FileName), password: null);
        Assert.Equal(developmentCertificate.Thumbprint, presented?.Thumbprint);
    }

    [Theory]
    [InlineData("nginx")]
    [InlineData("1")]
    public async Task RunAsync_UnknownServer_ExitsOneNamingKeyAndValue(string value)
    {
        using var folder = new TempFolder();
        var error = new StringWriter();

        var exitCode = await ProxyHostApp.RunAsync([.. HostRunner.PortZeroArguments(folder), $"--Host:Server={value}"], error);

        Assert.Equal(1, exitCode);
        Assert.Contains($"Host:Server is '{value}': use 'proxy' (our server, the default) or 'kestrel'.", error.ToString());
    }

    [Theory]
    [InlineData(null, ProxyHostServer.Proxy)]
    [InlineData("proxy", ProxyHostServer.Proxy)]
    [InlineData("Kestrel", ProxyHostServer.Kestrel)]
    [InlineData(" KESTREL ", ProxyHostServer.Kestrel)]
    public void Read_KnownValues_AnyCase(string? value, ProxyHostServer expected)
    {
        var configuration = new ConfigurationBuilder()
            .AddInMemoryCollection(new Dictionary<string, string?> { [HostServer.Key] = value }).Build();

        Assert.Equal(expected, HostServer.Read(configuration));
    }

    private static async Task<(Version Version, string? Server, string Body)> GetAsync(HttpClient client, string url, Version version)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, url) { Version = version, VersionPolicy = HttpVersionPolicy.RequestVersionExact };
        using var response = await client.SendAsync(request);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        return (response.Version, response.Headers.Server.ToString(), await response.Content.ReadAsStringAsync());
    }

    /// <summary>Three free loopback ports, held together while picked so they differ.</summary>
    private static (int, int, int) FreePorts()
    {
        var listeners = Enumerable.Range(0, 3).Select(_ => new TcpListener(IPAddress.Loopback, 0)).ToList();
        try
        {
            listeners.ForEach(l => l.Start());
            var ports = listeners.Select(l => ((IPEndPoint)l.LocalEndpoint).Port).ToList();
            return (ports[0], ports[1], ports[2]);
        }
        finally
        {
            listeners.ForEach(l => l.Stop());
        }
    }

    /// <summary>An HTTP/1.1 backend on our server that sends no Server header, so the one clients see is the proxy's.</summary>
    private static async Task<Backend> StartBackendAsync()
    {
        var builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [] });
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer(options => options.AddServerHeader = false);
        var app = builder.Build();
        app.MapGet("/{**rest}", (HttpRequest request) => $"backend: {request.Method} {request.Path}");
        await app.StartAsync();
        var address = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Single();
        return new Backend(app, new Uri(address + "/"));
    }

    private sealed record Backend(WebApplication App, Uri Address) : IAsyncDisposable
    {
        public async ValueTask DisposeAsync()
        {
            await App.StopAsync();
            await App.DisposeAsync();
        }
    }
}
