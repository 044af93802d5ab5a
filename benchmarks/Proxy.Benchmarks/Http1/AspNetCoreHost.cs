using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Protocols;
using Proxy.Server;
using Proxy.Server.Internal;

namespace Proxy.Benchmarks.Http1;

/// <summary>
/// A real ASP.NET Core app (WebApplication, routing, the <c>/size/{bytes:int}</c> endpoint of Proxy.Load) served
/// by our server's glue (HttpApplicationHandler, RequestFeatures, Http1Protocol) over in-memory pipes instead of
/// sockets. The host is started with a stand-in <see cref="IServer"/> that only keeps the application, so each
/// benchmark connection runs the same code path as an accepted socket connection after protocol selection.
/// </summary>
// Owned by the benchmark thread: started once in the global setup, disposed in the cleanup.
internal sealed class AspNetCoreHost : IAsyncDisposable
{
    private readonly WebApplication _app;
    private readonly CapturingServer _server;

    private AspNetCoreHost(WebApplication app, CapturingServer server)
    {
        _app = app;
        _server = server;
    }

    public static async Task<AspNetCoreHost> StartAsync()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Logging.AddFilter((_, level) => level >= LogLevel.Warning);
        var server = new CapturingServer(new ProxyServerOptions { AddServerHeader = false });
        builder.Services.AddSingleton<IServer>(server);
        var app = builder.Build();
        app.MapGet("/size/{bytes:int}", (HttpContext context, int bytes) =>
        {
            // As Proxy.Load's WriteBodyAsync: a cached body through Response.Body.
            context.Response.ContentType = "application/octet-stream";
            context.Response.ContentLength = SmallBodyHandler.Body.Length;
            return context.Response.Body.WriteAsync(SmallBodyHandler.Body, context.RequestAborted).AsTask();
        });
        await app.StartAsync();
        return new AspNetCoreHost(app, server);
    }

    /// <summary>Serves one HTTP/1.1 connection over <paramref name="transport"/> until the client closes it.</summary>
    public Task ServeHttp1Async(IDuplexPipe transport) => _server.ServeHttp1Async(transport);

    public async ValueTask DisposeAsync() => await _app.DisposeAsync();

    // Owned by the host: StartAsync once, then ServeHttp1Async from the benchmark.
    private sealed class CapturingServer(ProxyServerOptions options) : IServer
    {
        private IHttpRequestHandler? _handler;

        public IFeatureCollection Features { get; } = new FeatureCollection();

        public Task StartAsync<TContext>(IHttpApplication<TContext> application, CancellationToken cancellationToken) where TContext : notnull
        {
            _handler = new HttpApplicationHandler<TContext>(application, options, new DateHeaderCache(TimeProvider.System), NullLogger.Instance);
            return Task.CompletedTask;
        }

        public Task ServeHttp1Async(IDuplexPipe transport)
        {
            var handler = _handler ?? throw new InvalidOperationException("The host has not started.");
            var metadata = new ConnectionMetadata
            {
                ConnectionId = "bench",
                LocalEndPoint = new IPEndPoint(IPAddress.Loopback, 18080),
                RemoteEndPoint = new IPEndPoint(IPAddress.Loopback, 40000),
            };
            var protocol = EngineProtocolFactory.Instance.CreateHttp1(transport, options.Http1, handler, metadata, TimeProvider.System);
            return protocol.ProcessAsync(CancellationToken.None);
        }

        public Task StopAsync(CancellationToken cancellationToken) => Task.CompletedTask;

        public void Dispose()
        {
        }
    }
}
