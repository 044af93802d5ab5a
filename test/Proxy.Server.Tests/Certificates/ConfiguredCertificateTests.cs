using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Proxy.Server.Tests.Certificates;

/// <summary>Our server with certificates from the ProxyServer section: defaults, per endpoint, SNI, rotation.</summary>
public sealed class ConfiguredCertificateTests : IDisposable
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(30);
    private readonly CertificateFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Fact]
    public async Task EndpointPemCertificate_FilesSwapped_NextConnectionSeesNewCertificate()
    {
        using var first = CertificateFiles.Create();
        _files.WritePem(first);
        var reloads = new ReloadSignal();
        await using var app = await StartAsync(new()
        {
            ["ProxyServer:Endpoints:web:Url"] = "https://127.0.0.1:0",
            ["ProxyServer:Endpoints:web:Protocols"] = "Http2",
            ["ProxyServer:Endpoints:web:Certificate:Path"] = _files.PathOf("cert.pem"),
            ["ProxyServer:Endpoints:web:Certificate:KeyPath"] = _files.PathOf("key.pem"),
        }, reloads);

        var (thumbprint, version, _) = await GetAsync(app.Address);
        Assert.Equal(first.Thumbprint, thumbprint);
        Assert.Equal(HttpVersion.Version20, version);

        using var second = CertificateFiles.Create();
        var reloaded = reloads.WaitFor(second.Thumbprint);
        _files.WritePem(second);
        await reloaded.WaitAsync(Guard);

        (thumbprint, version, _) = await GetAsync(app.Address);
        Assert.Equal(second.Thumbprint, thumbprint);
        Assert.Equal(HttpVersion.Version20, version);
    }

    [Fact]
    public async Task CertificatesDefault_PfxWithPassword_ServesHttpsUrls()
    {
        using var certificate = CertificateFiles.Create();
        _files.WritePfx(certificate, "pw");
        await using var app = await StartAsync(new()
        {
            ["urls"] = "https://127.0.0.1:0",
            ["ProxyServer:Certificates:Default:Path"] = _files.PathOf("cert.pfx"),
            ["ProxyServer:Certificates:Default:Password"] = "pw",
        });

        var (thumbprint, _, _) = await GetAsync(app.Address);

        Assert.Equal(certificate.Thumbprint, thumbprint);
    }

    [Fact]
    public async Task Sni_EachHostNameGetsItsCertificate_UnknownNameGetsTheEndpointOne()
    {
        using var a = CertificateFiles.Create("a.test");
        using var wildcard = CertificateFiles.Create("any.b.test");
        using var fallback = CertificateFiles.Create("localhost");
        _files.WritePem(a, "a.pem", "a-key.pem");
        _files.WritePem(wildcard, "b.pem", "b-key.pem");
        _files.WritePem(fallback);
        await using var app = await StartAsync(new()
        {
            ["ProxyServer:Endpoints:web:Url"] = "https://127.0.0.1:0",
            ["ProxyServer:Endpoints:web:Certificate:Path"] = _files.PathOf("cert.pem"),
            ["ProxyServer:Endpoints:web:Certificate:KeyPath"] = _files.PathOf("key.pem"),
            ["ProxyServer:Endpoints:web:Sni:a.test:Certificate:Path"] = _files.PathOf("a.pem"),
            ["ProxyServer:Endpoints:web:Sni:a.test:Certificate:KeyPath"] = _files.PathOf("a-key.pem"),
            ["ProxyServer:Endpoints:web:Sni:*.b.test:Certificate:Path"] = _files.PathOf("b.pem"),
            ["ProxyServer:Endpoints:web:Sni:*.b.test:Certificate:KeyPath"] = _files.PathOf("b-key.pem"),
        });

        Assert.Equal(a.Thumbprint, (await GetAsync(app.Address, "A.test")).Thumbprint);
        Assert.Equal(wildcard.Thumbprint, (await GetAsync(app.Address, "x.b.test")).Thumbprint);
        Assert.Equal(fallback.Thumbprint, (await GetAsync(app.Address, "other.test")).Thumbprint);
    }

    [Fact]
    public async Task EndpointSslProtocols_OnlyThoseOffered()
    {
        using var server = CertificateFiles.Create();
        _files.WritePem(server);
        await using var app = await StartAsync(new()
        {
            ["ProxyServer:Endpoints:web:Url"] = "https://127.0.0.1:0",
            ["ProxyServer:Endpoints:web:SslProtocols:0"] = "Tls12",
            ["ProxyServer:Endpoints:web:Certificate:Path"] = _files.PathOf("cert.pem"),
            ["ProxyServer:Endpoints:web:Certificate:KeyPath"] = _files.PathOf("key.pem"),
        });

        // The client offers 1.2 and 1.3 and would take 1.3.
        Assert.StartsWith("Tls12 ", (await GetAsync(app.Address)).Body, StringComparison.Ordinal);
    }

    [Fact]
    public async Task EndpointClientCertificateMode_Require_HandshakeWithoutOneFails()
    {
        using var server = CertificateFiles.Create();
        _files.WritePem(server);
        await using var app = await StartAsync(new()
        {
            ["ProxyServer:Endpoints:web:Url"] = "https://127.0.0.1:0",
            ["ProxyServer:Endpoints:web:ClientCertificateMode"] = "RequireCertificate",
            ["ProxyServer:Endpoints:web:Certificate:Path"] = _files.PathOf("cert.pem"),
            ["ProxyServer:Endpoints:web:Certificate:KeyPath"] = _files.PathOf("key.pem"),
        });

        await Assert.ThrowsAsync<HttpRequestException>(() => GetAsync(app.Address));
    }

    [Theory]
    [InlineData("ProxyServer:Certificates:Default:Path", "absent.pem", "ProxyServer:Certificates:Default:Path: the file '{0}' does not exist.")]
    [InlineData("ProxyServer:Certificates:Default:Store", "My", "ProxyServer:Certificates:Default:Store: not supported here (known keys: Path, KeyPath, Password).")]
    [InlineData("ProxyServer:Certificates:Api:Path", "x.pfx", "ProxyServer:Certificates:Api: only Certificates:Default is read")]
    [InlineData("ProxyServer:Endpoints:web:Protocols", "Http3", "ProxyServer:Endpoints:web:Protocols: 'Http3' is not one of Http1, Http2, Http1AndHttp2.")]
    [InlineData("ProxyServer:Endpoints:web:Sni:a.test:Protocols", "Http2", "ProxyServer:Endpoints:web:Sni:a.test:Protocols: not supported here (known keys: Certificate).")]
    [InlineData("ProxyServer:Endpoints:web:SslProtocols:0", "Tls11", "ProxyServer:Endpoints:web:SslProtocols: 'Tls11' is not one of Tls12, Tls13")]
    [InlineData("ProxyServer:Endpoints:web:ClientCertificateMode", "DelayCertificate", "ProxyServer:Endpoints:web:ClientCertificateMode: 'DelayCertificate' is not one of NoCertificate, AllowCertificate, RequireCertificate.")]
    public async Task BadConfiguration_StartFails_NamingTheKey(string key, string value, string expected)
    {
        var values = new Dictionary<string, string?> { [key] = key.EndsWith(":Path", StringComparison.Ordinal) ? _files.PathOf(value) : value };
        if (key.StartsWith("ProxyServer:Endpoints:web:", StringComparison.Ordinal))
        {
            // https: the TLS keys are checked before anything binds (no development certificate is made).
            values["ProxyServer:Endpoints:web:Url"] = "https://127.0.0.1:0";
        }

        var ex = await Assert.ThrowsAnyAsync<InvalidOperationException>(() => StartAsync(values));

        Assert.StartsWith(string.Format(System.Globalization.CultureInfo.InvariantCulture, expected, _files.PathOf(value)), ex.Message, StringComparison.Ordinal);
    }

    private sealed record RunningApp(WebApplication App, Uri Address) : IAsyncDisposable
    {
        public async ValueTask DisposeAsync()
        {
            await App.StopAsync();
            await App.DisposeAsync();
        }
    }

    private static async Task<RunningApp> StartAsync(Dictionary<string, string?> config, ReloadSignal? reloads = null)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        if (reloads is not null)
        {
            builder.Logging.AddProvider(reloads);
        }

        builder.Configuration.AddInMemoryCollection(config);
        builder.WebHost.UseProxyServer();
        var app = builder.Build();
        app.Run(context => context.Response.WriteAsync(
            $"{context.Features.Get<Microsoft.AspNetCore.Connections.Features.ITlsHandshakeFeature>()?.Protocol} {context.Request.Protocol}"));
        try
        {
            await app.StartAsync();
        }
        catch
        {
            await app.DisposeAsync();
            throw;
        }

        var address = app.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.First();
        return new RunningApp(app, new Uri(address));
    }

    /// <summary>
    /// One request on a new connection (so a new handshake), with <paramref name="serverName"/> as the URL host (and SNI)
    /// while the socket goes to the server's loopback address. Returns the certificate's thumbprint and the HTTP version.
    /// </summary>
    private static async Task<(string Thumbprint, Version Version, string Body)> GetAsync(Uri address, string? serverName = null)
    {
        string? thumbprint = null;
        using var handler = new SocketsHttpHandler
        {
            UseProxy = false,
            SslOptions = { RemoteCertificateValidationCallback = (_, certificate, _, _) =>
            {
                thumbprint = new X509Certificate2(certificate!).Thumbprint;
                return true;
            } },
            ConnectCallback = async (_, cancellationToken) =>
            {
                var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
                await socket.ConnectAsync(IPAddress.Loopback, address.Port, cancellationToken);
                return new NetworkStream(socket, ownsSocket: true);
            },
        };
        using var client = new HttpClient(handler) { DefaultRequestVersion = HttpVersion.Version20, DefaultVersionPolicy = HttpVersionPolicy.RequestVersionOrLower };
        var target = new UriBuilder(address) { Host = serverName ?? "localhost" }.Uri;
        using var response = await client.GetAsync(target);
        response.EnsureSuccessStatusCode();
        return (thumbprint!, response.Version, await response.Content.ReadAsStringAsync());
    }

    /// <summary>Completes when the server logs "Certificate reloaded" for a given thumbprint (no polling, no sleeping).</summary>
    private sealed class ReloadSignal : ILoggerProvider, ILogger
    {
        private readonly ConcurrentDictionary<string, TaskCompletionSource> _waiting = new(StringComparer.OrdinalIgnoreCase);

        public Task WaitFor(string thumbprint) =>
            _waiting.GetOrAdd(thumbprint, _ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously)).Task;

        public ILogger CreateLogger(string categoryName) => this;

        public void Dispose()
        {
        }

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            if (state is IReadOnlyList<KeyValuePair<string, object?>> fields && fields.FirstOrDefault(f => f.Key == "Thumbprint").Value is string thumbprint
                && eventId.Name == "Reloaded")
            {
                _waiting.GetOrAdd(thumbprint, _ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously)).TrySetResult();
            }
        }
    }
}
