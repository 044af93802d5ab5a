using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>The transforms that take their value from the request: method, route values, the client certificate.</summary>
public class RequestValueTransformTests
{
    private static async Task<EchoResult> SendAsync(HttpRequestMessage message, Action<ProxyConfigDictionary> transforms,
        string routePath = "/{**catch-all}", X509Certificate2? clientCertificate = null)
    {
        await using var backend = await Backends.StartEchoAsync();
        var config = new ProxyConfigDictionary().Route("r1", "c1", routePath).Destination("c1", "d1", backend.Url);
        transforms(config);
        await using var proxy = await Proxies.StartConfiguredAsync(config, middleware: app =>
        {
            if (clientCertificate is not null)
            {
                // Stands in for a TLS handshake that presented this certificate: the transform reads the connection's
                // ITlsConnectionFeature, which both servers fill from their TLS layer.
                app.Use((context, next) =>
                {
                    context.Features.Set<ITlsConnectionFeature>(new TlsConnectionFeature { ClientCertificate = clientCertificate });
                    return next(context);
                });
            }
        });
        using var http = proxy.CreateClient();
        using var response = await http.SendAsync(message);
        return await response.ReadEchoAsync();
    }

    [Fact]
    public async Task HttpMethodChange_MatchingMethod_BackendSeesNewMethod()
    {
        var echo = await SendAsync(new HttpRequestMessage(HttpMethod.Put, "/items") { Content = new StringContent("body") },
            c => c.Set("Routes:r1:Transforms:0:HttpMethodChange", "PUT").Set("Routes:r1:Transforms:0:Set", "POST"));
        Assert.Equal("POST", echo.Method);
        Assert.Equal("body", echo.Body);
    }

    [Fact]
    public async Task HttpMethodChange_OtherMethod_Unchanged()
    {
        var echo = await SendAsync(new HttpRequestMessage(HttpMethod.Get, "/items"),
            c => c.Set("Routes:r1:Transforms:0:HttpMethodChange", "DELETE").Set("Routes:r1:Transforms:0:Set", "POST"));
        Assert.Equal("GET", echo.Method);
    }

    [Fact]
    public async Task QueryRouteParameter_SetAndAppend_FromRouteValues()
    {
        var echo = await SendAsync(new HttpRequestMessage(HttpMethod.Get, "/orders/42/eu?id=old&region=x"), c => c
            .Set("Routes:r1:Transforms:0:QueryRouteParameter", "id").Set("Routes:r1:Transforms:0:Set", "orderId")
            .Set("Routes:r1:Transforms:1:QueryRouteParameter", "region").Set("Routes:r1:Transforms:1:Append", "region")
            .Set("Routes:r1:Transforms:2:QueryRouteParameter", "absent").Set("Routes:r1:Transforms:2:Set", "noSuchValue"),
            routePath: "/orders/{orderId}/{region}");
        Assert.Equal("?id=42&region=x&region=eu", echo.Query);
    }

    [Fact]
    public async Task RequestHeaderRouteValue_SetAndAppend_FromRouteValues()
    {
        var message = new HttpRequestMessage(HttpMethod.Get, "/tenants/acme/users/7");
        message.Headers.Add("x-tenant", "spoofed");
        message.Headers.Add("x-user", "first");
        var echo = await SendAsync(message, c => c
            .Set("Routes:r1:Transforms:0:RequestHeaderRouteValue", "x-tenant").Set("Routes:r1:Transforms:0:Set", "tenant")
            .Set("Routes:r1:Transforms:1:RequestHeaderRouteValue", "x-user").Set("Routes:r1:Transforms:1:Append", "user")
            .Set("Routes:r1:Transforms:2:RequestHeaderRouteValue", "x-none").Set("Routes:r1:Transforms:2:Set", "noSuchValue"),
            routePath: "/tenants/{tenant}/users/{user}");
        Assert.Equal("acme", echo.Headers["x-tenant"]);
        Assert.Equal("first, 7", echo.Headers["x-user"]);
        Assert.False(echo.Headers.ContainsKey("x-none"));
    }

    [Fact]
    public async Task ClientCert_WithCertificate_Base64DerInHeader()
    {
        using var certificate = CreateCertificate("client");
        var message = new HttpRequestMessage(HttpMethod.Get, "/");
        message.Headers.Add("X-Client-Cert", "forged");
        var echo = await SendAsync(message, c => c.Set("Routes:r1:Transforms:0:ClientCert", "X-Client-Cert"), clientCertificate: certificate);
        Assert.Equal(Convert.ToBase64String(certificate.RawData), echo.Headers["x-client-cert"]);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task ClientCert_OverRealTls_CertificateFromTheHandshake(bool presentCertificate)
    {
        using var serverCertificate = CreateCertificate("localhost");
        using var clientCertificate = CreateCertificate("client");
        await using var backend = await Backends.StartEchoAsync();
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url)
            .Set("Routes:r1:Transforms:0:ClientCert", "X-Client-Cert");
        await using var proxy = await ProxyTestHost.StartTlsProxyAsync(b =>
        {
            b.Configuration.AddInMemoryCollection(config);
            b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
        }, app => app.MapProxyForwarding(), serverCertificate);
        var handler = new SocketsHttpHandler { SslOptions = { RemoteCertificateValidationCallback = (_, _, _, _) => true } };
        if (presentCertificate)
        {
            handler.SslOptions.ClientCertificates = [clientCertificate];
        }

        using var http = new HttpClient(handler);
        var message = new HttpRequestMessage(HttpMethod.Get, $"https://localhost:{proxy.BaseAddress.Port}/") { Version = System.Net.HttpVersion.Version20 };
        message.Headers.Add("X-Client-Cert", "forged");
        using var response = await http.SendAsync(message);
        var echo = await response.ReadEchoAsync();

        Assert.Equal(System.Net.HttpVersion.Version20, response.Version);
        if (presentCertificate)
        {
            Assert.Equal(Convert.ToBase64String(clientCertificate.RawData), echo.Headers["x-client-cert"]);
        }
        else
        {
            Assert.False(echo.Headers.ContainsKey("x-client-cert"));
        }
    }

    private static X509Certificate2 CreateCertificate(string name)
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var request = new CertificateRequest("CN=" + name, key, HashAlgorithmName.SHA256);
        // A client certificate must say it is one (clientAuth), or SslStream will not offer it.
        request.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension([new Oid("1.3.6.1.5.5.7.3.2"), new Oid("1.3.6.1.5.5.7.3.1")], false));
        var created = request.CreateSelfSigned(DateTimeOffset.UtcNow.AddDays(-1), DateTimeOffset.UtcNow.AddDays(1));
        // An ephemeral key does not work with SslStream everywhere: a PKCS#12 round trip gives a usable one.
        using (created)
        {
            return X509CertificateLoader.LoadPkcs12(created.Export(X509ContentType.Pkcs12), null);
        }
    }

    [Fact]
    public async Task ClientCert_WithoutCertificate_ClientHeaderRemoved()
    {
        var message = new HttpRequestMessage(HttpMethod.Get, "/");
        message.Headers.Add("X-Client-Cert", "forged");
        var echo = await SendAsync(message, c => c.Set("Routes:r1:Transforms:0:ClientCert", "X-Client-Cert"));
        Assert.False(echo.Headers.ContainsKey("x-client-cert"));
    }
}
