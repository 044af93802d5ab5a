using System.Net;
using System.Security.Authentication;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>YARP's HttpClient and HttpRequest keys: SslProtocols, WebProxy, header encodings, AllowResponseBuffering.</summary>
public class HttpClientSettingsTests
{
    [Theory]
    [InlineData(null, "Tls13")]
    [InlineData("Tls12", "Tls12")]
    public async Task SslProtocols_OfferedToTlsBackend(string? configured, string negotiated)
    {
        await using var backend = await Backends.StartTlsAsync(context =>
            context.Response.WriteAsync(context.Features.Get<ITlsHandshakeFeature>()!.Protocol.ToString()));
        await using var proxy = await Proxies.StartForAsync(backend, extra: c =>
        {
            c.Set("Clusters:c1:HttpClient:DangerousAcceptAnyServerCertificate", "true");
            if (configured is not null)
            {
                c.Set("Clusters:c1:HttpClient:SslProtocols:0", configured);
            }
        });
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(negotiated, await response.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task WebProxy_RequestsGoThroughTheOutboundProxy()
    {
        // The "outbound proxy" is a Kestrel app that answers itself: a request that reaches it in absolute form for the
        // (dead) destination went through it.
        await using var webProxy = await ProxyTestHost.StartBackendAsync(app => app.Run(context =>
            context.Response.WriteAsync(context.Features.Get<IHttpRequestFeature>()!.RawTarget)));
        var destination = Proxies.DeadAddress();
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", destination)
            .Set("Clusters:c1:HttpClient:WebProxy:Address", webProxy.Url));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/via?x=1");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(destination + "via?x=1", await response.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task WebProxy_BypassOnLocal_LoopbackDestinationReachedDirectly()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend, extra: c => c
            .Set("Clusters:c1:HttpClient:WebProxy:Address", Proxies.DeadAddress())
            .Set("Clusters:c1:HttpClient:WebProxy:BypassOnLocal", "true"));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/direct");

        Assert.Equal("/direct", (await response.ReadEchoAsync()).Path);
    }

    [Fact]
    public async Task HeaderEncoding_Utf8_NonAsciiValuesBothWays_ClusterUsesHttpClient()
    {
        // The backend reads and writes header values as UTF-8 and shows what it decoded as code points.
        await using var backend = await Backends.StartKestrelAsync(o =>
        {
            o.Listen(IPAddress.Loopback, 0);
            o.RequestHeaderEncodingSelector = _ => System.Text.Encoding.UTF8;
            o.ResponseHeaderEncodingSelector = _ => System.Text.Encoding.UTF8;
        }, context =>
        {
            context.Response.Headers["x-out"] = "grüße";
            return context.Response.WriteAsync(CodePoints(context.Request.Headers["x-in"].ToString()));
        });
        var logs = new CapturingLoggerProvider();
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url)
            .Set("Routes:r1:Transforms:0:RequestHeader", "x-in").Set("Routes:r1:Transforms:0:Set", "café")
            .Set("Clusters:c1:HttpClient:RequestHeaderEncoding", "utf-8")
            .Set("Clusters:c1:HttpClient:ResponseHeaderEncoding", "utf-8");
        string? decoded = null;
        await using var proxy = await Proxies.StartConfiguredAsync(config, configure: b =>
        {
            b.Logging.AddProvider(logs);
            // Kestrel refuses a non-ASCII response header value as the forwarder copies it, unless told its encoding.
            b.Services.Configure<Microsoft.AspNetCore.Server.Kestrel.Core.KestrelServerOptions>(o => o.ResponseHeaderEncodingSelector = _ => System.Text.Encoding.UTF8);
        }, middleware: app =>
        {
            // What the forwarder decoded from the backend, then made ASCII for the client-facing server.
            app.Use((context, next) =>
            {
                context.Response.OnStarting(() =>
                {
                    decoded = context.Response.Headers["x-out"].ToString();
                    context.Response.Headers["x-out"] = CodePoints(decoded);
                    return Task.CompletedTask;
                });
                return next(context);
            });
        });
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(CodePoints("café"), await response.Content.ReadAsStringAsync());
        Assert.Equal("grüße", decoded);
        // Whatever the host, this cluster runs on HttpClient; on our server with the relay it says why, once, at Information.
        Assert.Null(proxy.Services.GetRequiredService<ProxyStateManager>().Current.Clusters["c1"].NativeTransport);
#if NATIVE_RELAY
        Assert.Single(logs.Entries, e => e.Level == LogLevel.Information && e.EventId.Id == 30
            && e.Message.Contains("'c1'", StringComparison.Ordinal)
            && e.Message.Contains("HttpClient:RequestHeaderEncoding, HttpClient:ResponseHeaderEncoding", StringComparison.Ordinal));
#else
        Assert.DoesNotContain(logs.Entries, e => e.EventId.Id == 30);
#endif
    }

    private static string CodePoints(string text) => string.Join(' ', text.Select(c => ((int)c).ToString("x", System.Globalization.CultureInfo.InvariantCulture)));

    [Theory]
    [InlineData(null, true)]
    [InlineData("false", true)]
    [InlineData("true", false)]
    public async Task AllowResponseBuffering_DisableBufferingCalledUnlessAllowed(string? allow, bool disabled)
    {
        await using var backend = await Backends.StartEchoAsync();
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url);
        if (allow is not null)
        {
            config.Set("Clusters:c1:HttpRequest:AllowResponseBuffering", allow);
        }

        var calls = 0;
        await using var proxy = await Proxies.StartConfiguredAsync(config, middleware: app => app.Use((context, next) =>
        {
            var inner = context.Features.Get<IHttpResponseBodyFeature>()!;
            context.Features.Set<IHttpResponseBodyFeature>(new RecordingBodyFeature(inner, () => Interlocked.Increment(ref calls)));
            return next(context);
        }));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");
        await response.ReadEchoAsync();

        Assert.Equal(disabled, Volatile.Read(ref calls) > 0);
    }

    /// <summary>The server's body feature, with DisableBuffering calls counted.</summary>
    private sealed class RecordingBodyFeature(IHttpResponseBodyFeature inner, Action disableBuffering) : IHttpResponseBodyFeature
    {
        public Stream Stream => inner.Stream;

        public System.IO.Pipelines.PipeWriter Writer => inner.Writer;

        public Task CompleteAsync() => inner.CompleteAsync();

        public void DisableBuffering()
        {
            disableBuffering();
            inner.DisableBuffering();
        }

        public Task SendFileAsync(string path, long offset, long? count, CancellationToken cancellationToken = default) =>
            inner.SendFileAsync(path, offset, count, cancellationToken);

        public Task StartAsync(CancellationToken cancellationToken = default) => inner.StartAsync(cancellationToken);
    }
}
