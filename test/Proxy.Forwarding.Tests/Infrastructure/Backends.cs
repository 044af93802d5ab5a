using System.Text.Json;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>Backends the tests share.</summary>
public static class Backends
{
    /// <summary>Echoes what it received as JSON: method, path, query, protocol, headers.</summary>
    public static Task<TestApp> StartEchoAsync(TestProtocol protocol = TestProtocol.Http1) =>
        ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            var body = await new StreamReader(context.Request.Body).ReadToEndAsync(context.RequestAborted);
            var echo = new EchoResult
            {
                Method = context.Request.Method,
                Path = context.Request.Path.Value ?? "",
                RawPath = context.Request.Path.ToUriComponent(),
                Query = context.Request.QueryString.Value ?? "",
                Protocol = context.Request.Protocol,
                Body = body,
                Headers = context.Request.Headers.ToDictionary(h => h.Key.ToLowerInvariant(), h => h.Value.ToString()),
            };
            context.Response.Headers["x-backend"] = "echo";
            await context.Response.WriteAsJsonAsync(echo, context.RequestAborted);
        }), protocol);

    /// <summary>
    /// A backend on TLS 1.2 and 1.3 with a throwaway certificate (clusters reach it with DangerousAcceptAnyServerCertificate);
    /// <paramref name="serverName"/> sees each handshake's SNI name.
    /// </summary>
    public static Task<TestApp> StartTlsAsync(RequestDelegate handler, Action<string?>? serverName = null)
    {
        using var key = System.Security.Cryptography.RSA.Create(2048);
        var request = new System.Security.Cryptography.X509Certificates.CertificateRequest("CN=localhost", key,
            System.Security.Cryptography.HashAlgorithmName.SHA256, System.Security.Cryptography.RSASignaturePadding.Pkcs1);
        var certificate = request.CreateSelfSigned(DateTimeOffset.UtcNow.AddDays(-1), DateTimeOffset.UtcNow.AddDays(1));
        return StartKestrelAsync(o => o.Listen(System.Net.IPAddress.Loopback, 0, l => l.UseHttps(new Microsoft.AspNetCore.Server.Kestrel.Https.HttpsConnectionAdapterOptions
        {
            SslProtocols = System.Security.Authentication.SslProtocols.Tls12 | System.Security.Authentication.SslProtocols.Tls13,
            ServerCertificateSelector = (_, name) =>
            {
                serverName?.Invoke(name);
                return certificate;
            },
        })), handler);
    }

    /// <summary>A backend whose Kestrel options the test chooses (<see cref="ProxyTestHost.StartBackendAsync"/> fixes them).</summary>
    public static async Task<TestApp> StartKestrelAsync(Action<Microsoft.AspNetCore.Server.Kestrel.Core.KestrelServerOptions> kestrel, RequestDelegate handler)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseKestrel(kestrel);
        var app = builder.Build();
        app.Run(handler);
        await app.StartAsync();
        var address = app.Services.GetRequiredService<Microsoft.AspNetCore.Hosting.Server.IServer>()
            .Features.Get<Microsoft.AspNetCore.Hosting.Server.Features.IServerAddressesFeature>()!.Addresses.First();
        return new TestApp(app, new Uri(address + "/"), TestProtocol.Http1);
    }

    public static async Task<EchoResult> ReadEchoAsync(this HttpResponseMessage response)
    {
        var text = await response.Content.ReadAsStringAsync();
        Assert.True(response.IsSuccessStatusCode, $"{(int)response.StatusCode}: {text}");
        return JsonSerializer.Deserialize<EchoResult>(text, new JsonSerializerOptions(JsonSerializerDefaults.Web))!;
    }
}

public sealed class EchoResult
{
    public string Method { get; set; } = "";
    public string Path { get; set; } = "";
    public string RawPath { get; set; } = "";
    public string Query { get; set; } = "";
    public string Protocol { get; set; } = "";
    public string Body { get; set; } = "";
    public Dictionary<string, string> Headers { get; set; } = [];
}
