using System.IO.Pipelines;
using System.Net;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http1.Client;

namespace Proxy.Protocols.Tests.Http1;

/// <summary>The HTTP/1.1 client against Kestrel over a real loopback socket: Kestrel is the reference backend.</summary>
public sealed class Http1ClientKestrelTests : IAsyncLifetime
{
    private WebApplication? _app;
    private IPEndPoint? _endPoint;

    public async Task InitializeAsync()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseKestrel(o => o.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http1));
        _app = builder.Build();
        // Each endpoint answers with the connection id, so a test can tell whether exchanges shared a connection.
        _app.MapGet("/hello", (HttpContext context) => $"hello from {context.Connection.Id}");
        _app.MapPost("/echo", async (HttpContext context) =>
        {
            using var reader = new StreamReader(context.Request.Body, Encoding.UTF8);
            var body = await reader.ReadToEndAsync();
            var framing = context.Request.ContentLength is { } length ? $"cl={length}" : $"te={context.Request.Headers.TransferEncoding}";
            return $"{context.Connection.Id}|{framing}|{body}";
        });
        await _app.StartAsync();
        var address = _app.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.First();
        _endPoint = new IPEndPoint(IPAddress.Loopback, new Uri(address).Port);
    }

    public async Task DisposeAsync()
    {
        if (_app is not null)
        {
            await _app.StopAsync(TimeSpan.FromSeconds(2));
            await _app.DisposeAsync();
        }
    }

    [Fact]
    public async Task SendAsync_Get_StatusAndBodyFromKestrel()
    {
        await using var connection = await ConnectAsync();

        var (status, body) = await ExchangeAsync(connection, new BackendRequest { Method = "GET", Authority = "localhost", PathAndQuery = "/hello" }, null);

        Assert.Equal(200, status);
        Assert.StartsWith("hello from ", body);
        Assert.True(connection.IsReusable);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task SendAsync_Post_BodyEchoedWithTheChosenFraming(bool contentLength)
    {
        await using var connection = await ConnectAsync();
        var payload = new string('p', 20_000);
        var request = new BackendRequest
        {
            Method = "POST",
            Authority = "localhost",
            PathAndQuery = "/echo",
            HasBody = true,
            ContentLength = contentLength ? payload.Length : null,
        };
        request.Headers.Add(new("content-type", "text/plain"));

        var (status, body) = await ExchangeAsync(connection, request, payload);

        Assert.Equal(200, status);
        var parts = body.Split('|');
        Assert.Equal(contentLength ? $"cl={payload.Length}" : "te=chunked", parts[1]);
        Assert.Equal(payload, parts[2]);
        Assert.True(connection.IsReusable);
    }

    [Fact]
    public async Task SendAsync_ThreeExchanges_SameKeptAliveConnection()
    {
        await using var connection = await ConnectAsync();
        var released = new List<bool>();
        connection.ExchangeReleased += (_, reusable) => released.Add(reusable);

        var (_, first) = await ExchangeAsync(connection, new BackendRequest { Method = "GET", Authority = "localhost", PathAndQuery = "/hello" }, null);
        var (_, second) = await ExchangeAsync(connection,
            new BackendRequest { Method = "POST", Authority = "localhost", PathAndQuery = "/echo", HasBody = true }, "chunked body");
        var (_, third) = await ExchangeAsync(connection,
            new BackendRequest { Method = "POST", Authority = "localhost", PathAndQuery = "/echo", HasBody = true, ContentLength = 7 }, "cl body");

        var connectionId = first["hello from ".Length..];
        Assert.Equal($"{connectionId}|te=chunked|chunked body", second);
        Assert.Equal($"{connectionId}|cl=7|cl body", third);
        Assert.Equal([true, true, true], released);
    }

    private async Task<Http1ClientConnection> ConnectAsync()
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        await socket.ConnectAsync(_endPoint!);
        var stream = new NetworkStream(socket, ownsSocket: true);
        return new Http1ClientConnection(new StreamDuplexPipe(stream));
    }

    private static async Task<(int Status, string Body)> ExchangeAsync(Http1ClientConnection connection, BackendRequest request, string? body)
    {
        var exchange = await connection.SendAsync(request);
        await using (exchange)
        {
            if (body is not null)
            {
                // Two writes: two chunks when chunked, and the content-length count checked across writes.
                var bytes = Encoding.UTF8.GetBytes(body);
                await exchange.RequestBody.WriteAsync(bytes.AsMemory(0, bytes.Length / 2));
                await exchange.RequestBody.WriteAsync(bytes.AsMemory(bytes.Length / 2));
                await exchange.RequestBody.CompleteAsync();
            }
            await exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask().WaitAsync(Http1ClientHarness.Guard);
            var text = await Http1ClientHarness.ReadToEndAsync(exchange.ResponseBody);
            return (exchange.StatusCode, text);
        }
    }

    // Owned by one test connection.
    private sealed class StreamDuplexPipe(Stream stream) : IDuplexPipe
    {
        public PipeReader Input { get; } = PipeReader.Create(stream);
        public PipeWriter Output { get; } = PipeWriter.Create(stream);
    }
}
