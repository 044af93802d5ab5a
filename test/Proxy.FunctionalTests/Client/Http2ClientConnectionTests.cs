using System.Net;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http2.Client;
using Proxy.Server;
using Proxy.Transport.Client;

namespace Proxy.FunctionalTests.Client;

/// <summary>Our HTTP/2 client connection against real h2c servers (Kestrel and ours) over real sockets.</summary>
public sealed class Http2ClientConnectionTests
{
    public static TheoryData<string> Servers => new() { "kestrel", "ours" };

    private static async Task<WebApplication> StartBackendAsync(string server, Task? gate = null)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        if (server == "kestrel")
        {
            builder.WebHost.UseKestrel(o => o.Listen(IPAddress.Loopback, 0, l => l.Protocols = Microsoft.AspNetCore.Server.Kestrel.Core.HttpProtocols.Http2));
        }
        else
        {
            builder.WebHost.UseProxyServer(o => o.Listen(IPAddress.Loopback, 0, l => l.Protocols = Proxy.Server.HttpProtocols.Http2));
        }
        var app = builder.Build();
        app.MapGet("/hello", () => "hello from " + server);
        app.MapGet("/gated", async () =>
        {
            // Answers once the test opens the gate: until then every stream it opened stays open.
            await (gate ?? Task.CompletedTask);
            return "hello from " + server;
        });
        app.MapPost("/echo", async (HttpContext context) =>
        {
            context.Response.Headers["x-echo"] = "1";
            context.Response.DeclareTrailer("x-trailer");
            await context.Request.Body.CopyToAsync(context.Response.Body);
            context.Response.AppendTrailer("x-trailer", "done");
        });
        app.MapGet("/reset", async (HttpContext context) =>
        {
            await context.Response.StartAsync();
            await context.Response.Body.FlushAsync();
            context.Features.Get<IHttpResetFeature>()!.Reset(0x2);
        });
        app.MapGet("/die", async (HttpContext context) =>
        {
            await context.Response.WriteAsync("partial\n");
            await context.Response.Body.FlushAsync();
            context.Abort();
        });
        app.MapGet("/slow", async (HttpContext context) =>
        {
            await context.Response.StartAsync();
            await context.Response.Body.FlushAsync();
            await Task.Delay(Timeout.Infinite, context.RequestAborted);
        });
        await app.StartAsync();
        return app;
    }

    private static async Task<(Http2ClientConnection Connection, BackendTransport Transport, Task Run)> ConnectAsync(WebApplication app, Http2ClientOptions? options = null)
    {
        var address = new Uri(app.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.First());
        var transport = await BackendConnector.ConnectAsync("127.0.0.1", address.Port, null, TimeSpan.FromSeconds(10));
        var connection = new Http2ClientConnection(transport.Transport, options);
        var run = connection.RunAsync();
        return (connection, transport, run);
    }

    private static BackendRequest Request(string method, string path, bool hasBody = false) => new()
    {
        Method = method,
        Scheme = "http",
        Authority = "backend.test",
        PathAndQuery = path,
        HasBody = hasBody,
    };

    private static async Task<string> ReadBodyAsync(BackendExchange exchange)
    {
        var text = new StringBuilder();
        while (true)
        {
            var result = await exchange.ResponseBody.ReadAsync();
            foreach (var segment in result.Buffer)
            {
                text.Append(Encoding.UTF8.GetString(segment.Span));
            }
            exchange.ResponseBody.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                return text.ToString();
            }
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task Get_ResponseHeadAndBody_Relayed(string server)
    {
        await using var app = await StartBackendAsync(server);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            var exchange = connection.TryOpen(Request("GET", "/hello"))!;
            await exchange.ReadResponseHeadAsync(CancellationToken.None);
            Assert.Equal(200, exchange.StatusCode);
            Assert.StartsWith("text/plain", exchange.ResponseHeaders.Get("content-type"));
            Assert.Equal("hello from " + server, await ReadBodyAsync(exchange));
            await exchange.DisposeAsync();
            connection.StartShutdown();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task Post_BodyStreamedBothWays_TrailersArrive(string server)
    {
        await using var app = await StartBackendAsync(server);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            var request = Request("POST", "/echo", hasBody: true);
            request.Headers.Add(new("te", "trailers"));
            var exchange = connection.TryOpen(request)!;
            var payload = new string('x', 200_000); // several DATA frames and window updates
            await exchange.RequestBody.WriteAsync(Encoding.UTF8.GetBytes(payload));
            await exchange.RequestBody.CompleteAsync();
            await exchange.ReadResponseHeadAsync(CancellationToken.None);
            Assert.Equal("1", exchange.ResponseHeaders.Get("x-echo"));
            Assert.Equal(payload, await ReadBodyAsync(exchange));
            Assert.Equal("done", exchange.ResponseTrailers.Get("x-trailer"));
            await exchange.DisposeAsync();
            connection.Abort();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task ManyConcurrentStreams_AllComplete_LimitFromSettingsHonoured(string server)
    {
        var gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var app = await StartBackendAsync(server, gate.Task);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            // Warm up: the backend's SETTINGS (100 streams) are known after the first exchange.
            var first = connection.TryOpen(Request("GET", "/hello"))!;
            await first.ReadResponseHeadAsync(CancellationToken.None);
            await ReadBodyAsync(first);
            await first.DisposeAsync();
            Assert.Equal(100, connection.MaxConcurrentStreams);

            var exchanges = new List<BackendExchange>();
            for (var i = 0; i < 150; i++)
            {
                // Held by the backend until the gate opens, so no stream can finish and free its slot meanwhile.
                if (connection.TryOpen(Request("GET", "/gated")) is { } exchange)
                {
                    exchanges.Add(exchange);
                }
            }
            Assert.Equal(100, exchanges.Count); // the 101st is refused by us, not sent
            gate.SetResult();
            var bodies = await Task.WhenAll(exchanges.Select(async e =>
            {
                await e.ReadResponseHeadAsync(CancellationToken.None);
                var body = await ReadBodyAsync(e);
                await e.DisposeAsync();
                return body;
            }));
            Assert.All(bodies, b => Assert.Equal("hello from " + server, b));
            Assert.True(SpinWait.SpinUntil(() => connection.ActiveStreams == 0, TimeSpan.FromSeconds(10)));
            connection.Abort();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task BackendResetsStream_BodyFaultsWithCode_OtherStreamsCarryOn(string server)
    {
        await using var app = await StartBackendAsync(server);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            var reset = connection.TryOpen(Request("GET", "/reset"))!;
            await reset.ReadResponseHeadAsync(CancellationToken.None);
            var error = await Assert.ThrowsAsync<BackendException>(() => ReadBodyAsync(reset));
            Assert.Equal(BackendFailure.StreamReset, error.Failure);
            Assert.Equal(0x2u, error.ErrorCode);
            await reset.DisposeAsync();

            var ok = connection.TryOpen(Request("GET", "/hello"))!;
            await ok.ReadResponseHeadAsync(CancellationToken.None);
            Assert.Equal("hello from " + server, await ReadBodyAsync(ok));
            await ok.DisposeAsync();
            connection.Abort();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task BackendAbortsMidBody_BodyFaults(string server)
    {
        await using var app = await StartBackendAsync(server);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            var dying = connection.TryOpen(Request("GET", "/die"))!;
            await dying.ReadResponseHeadAsync(CancellationToken.None);
            var error = await Assert.ThrowsAsync<BackendException>(() => ReadBodyAsync(dying));
            Assert.Equal(BackendFailure.StreamReset, error.Failure);
            await dying.DisposeAsync();
            connection.Abort();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task Abort_BackendSeesCancel_ConnectionStillServes(string server)
    {
        await using var app = await StartBackendAsync(server);
        var (connection, transport, run) = await ConnectAsync(app);
        await using (transport)
        {
            var slow = connection.TryOpen(Request("GET", "/slow"))!;
            await slow.ReadResponseHeadAsync(CancellationToken.None);
            slow.Abort();
            var error = await Assert.ThrowsAsync<BackendException>(() => ReadBodyAsync(slow));
            Assert.Equal(BackendFailure.Aborted, error.Failure);
            await slow.DisposeAsync();
            Assert.True(SpinWait.SpinUntil(() => connection.ActiveStreams == 0, TimeSpan.FromSeconds(10)));

            var ok = connection.TryOpen(Request("GET", "/hello"))!;
            await ok.ReadResponseHeadAsync(CancellationToken.None);
            Assert.Equal("hello from " + server, await ReadBodyAsync(ok));
            await ok.DisposeAsync();
            connection.Abort();
            await run.WaitAsync(TimeSpan.FromSeconds(10));
        }
    }
}
