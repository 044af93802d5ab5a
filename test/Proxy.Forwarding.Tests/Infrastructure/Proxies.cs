using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>Shortcuts for the common shapes: one backend behind one configured proxy.</summary>
public static class Proxies
{
    /// <param name="requestCompleted">
    /// Called when the server is done with each request (the response's OnCompleted): after the forwarder returned, so
    /// after its outcome was recorded (passive health, the destination's request count).
    /// </param>
    /// <param name="configure">More for the builder (loggers, server options), after the proxy's configuration.</param>
    /// <param name="middleware">Middleware in front of the proxy's endpoints.</param>
    public static Task<TestApp> StartConfiguredAsync(ProxyConfigDictionary config, TestProtocol protocol = TestProtocol.Http1,
        Action? requestCompleted = null, Action<WebApplicationBuilder>? configure = null, Action<WebApplication>? middleware = null) =>
        ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Configuration.AddInMemoryCollection(config);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
                if (middleware is not null || requestCompleted is not null)
                {
                    ProxyTestHost.NeedsPipeline(b.Services);
                }

                configure?.Invoke(b);
            },
            app =>
            {
                middleware?.Invoke(app);
                if (requestCompleted is not null)
                {
                    app.Use((context, next) =>
                    {
                        context.Response.OnCompleted(() =>
                        {
                            requestCompleted();
                            return Task.CompletedTask;
                        });
                        return next(context);
                    });
                }
                app.MapProxyForwarding();
            },
            protocol);

    /// <summary>A proxy with one catch-all route to one destination.</summary>
    public static Task<TestApp> StartForAsync(TestApp backend, TestProtocol clientProtocol = TestProtocol.Http1, bool h2cBackend = false,
        Action<ProxyConfigDictionary>? extra = null, Action? requestCompleted = null)
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url);
        if (h2cBackend)
        {
            config.H2c("c1");
        }

        extra?.Invoke(config);
        return StartConfiguredAsync(config, clientProtocol, requestCompleted);
    }

    /// <summary>A loopback address nobody listens on.</summary>
    public static string DeadAddress()
    {
        using var listener = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
        listener.Start();
        var port = ((System.Net.IPEndPoint)listener.LocalEndpoint).Port;
        listener.Stop();
        return $"http://127.0.0.1:{port}/";
    }
}
