using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// What an operator sees at the default Warning level: nothing for outcomes the client caused (it went away, reset its
/// upload, let its own gRPC deadline pass), and exactly one warning naming route, cluster and destination when the
/// backend or the proxy failed. Every entry of the proxy app is captured, the server's own included.
/// </summary>
public class LoggingTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(15);

    [Theory]
    [InlineData(TestProtocol.Http1)]
    [InlineData(TestProtocol.Http2)]
    public async Task ClientCancelsMidResponse_NoWarning(TestProtocol client)
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "text/event-stream";
            await context.Response.WriteAsync("data: first\n\n");
            await context.Response.Body.FlushAsync();
            await Task.Delay(Timeout.Infinite, context.RequestAborted).ContinueWith(_ => { }, TaskScheduler.Default);
        }));
        await using var proxy = await StartProxyAsync(backend, client);
        using var http = proxy.App.CreateClient();

        using (var cts = new CancellationTokenSource())
        {
            using var response = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead, cts.Token).WaitAsync(Guard);
            using var reader = new StreamReader(await response.Content.ReadAsStreamAsync(cts.Token));
            Assert.Equal("data: first", await reader.ReadLineAsync(cts.Token).AsTask().WaitAsync(Guard));
            cts.Cancel(); // HTTP/2: RST_STREAM(CANCEL); HTTP/1.1: the connection closes
        }

        await proxy.Completed.WaitAsync(Guard);

        Assert.Empty(proxy.Logs.Warnings);
        AssertClientOutcomeAtDebug(proxy.Logs);
    }

    [Theory]
    [InlineData(TestProtocol.Http1)]
    [InlineData(TestProtocol.Http2)]
    public async Task ClientAbandonsUploadMidBody_NoWarning(TestProtocol client)
    {
        var bodyArrived = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            var buffer = new byte[64];
            try
            {
                while (await context.Request.Body.ReadAsync(buffer, context.RequestAborted) > 0)
                {
                    bodyArrived.TrySetResult();
                }
            }
            catch (Exception)
            {
                // The proxy broke the upload off: that is the point.
            }
        }));
        await using var proxy = await StartProxyAsync(backend, client);
        using var http = proxy.App.CreateClient();
        using var cts = new CancellationTokenSource();

        var call = http.PostAsync("/upload", new UnfinishedUpload(), cts.Token);
        await bodyArrived.Task.WaitAsync(Guard);
        cts.Cancel(); // HTTP/2: RST_STREAM(CANCEL) in the middle of the request body; HTTP/1.1: the connection closes
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => call.WaitAsync(Guard));

        await proxy.Completed.WaitAsync(Guard);

        Assert.Empty(proxy.Logs.Warnings);
        AssertClientOutcomeAtDebug(proxy.Logs);
    }

    [Fact]
    public async Task Grpc_ClientDeadlineExpires_NoWarning()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(
            app => app.Run(context => Task.Delay(Timeout.Infinite, context.RequestAborted)), TestProtocol.Http2);
        await using var proxy = await StartProxyAsync(backend, TestProtocol.Http2, c => c.H2c("c1"));
        using var http = proxy.App.CreateClient();
        using var request = ErrorTests.GrpcRequest();
        request.Headers.Add("grpc-timeout", "200m");

        using var response = await http.SendAsync(request).WaitAsync(Guard);
        await proxy.Completed.WaitAsync(Guard);

        Assert.Equal("4", response.Headers.GetValues("grpc-status").Single()); // DEADLINE_EXCEEDED: the call's own deadline
        Assert.Empty(proxy.Logs.Warnings);
        AssertClientOutcomeAtDebug(proxy.Logs);
    }

    [Fact]
    public async Task RouteTimeoutElapses_OneWarningNamingRouteClusterDestination()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(context => Task.Delay(Timeout.Infinite, context.RequestAborted)));
        await using var proxy = await StartProxyAsync(backend, TestProtocol.Http1, c => c.Set("Routes:r1:Timeout", "00:00:00.2"));
        using var http = proxy.App.CreateClient();

        using var response = await http.GetAsync("/slow").WaitAsync(Guard);
        await proxy.Completed.WaitAsync(Guard);

        // The proxy's own deadline, not the client's: the backend was too slow, and the operator must hear of it.
        Assert.Equal(HttpStatusCode.GatewayTimeout, response.StatusCode);
        AssertOneWarningNamingTheRequest(proxy.Logs, "RequestTimedOut");
    }

    [Theory]
    [InlineData(TestProtocol.Http1)]
    [InlineData(TestProtocol.Http2)]
    public async Task BackendResetsMidResponse_OneWarningNamingRouteClusterDestination(TestProtocol client)
    {
        var breakNow = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            await context.Response.WriteAsync("partial");
            await context.Response.Body.FlushAsync();
            await breakNow.Task.WaitAsync(context.RequestAborted);
            context.Abort();
        }));
        await using var proxy = await StartProxyAsync(backend, client);
        using var http = proxy.App.CreateClient();

        using var response = await http.GetAsync("/", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);
        var stream = await response.Content.ReadAsStreamAsync();
        await stream.ReadExactlyAsync(new byte[7]).AsTask().WaitAsync(Guard);
        breakNow.SetResult();
        await Assert.ThrowsAnyAsync<Exception>(() => stream.ReadAsync(new byte[16]).AsTask().WaitAsync(Guard));
        await proxy.Completed.WaitAsync(Guard);

        AssertOneWarningNamingTheRequest(proxy.Logs, "ResponseBodyDestination");
    }

    /// <summary>
    /// A body that sends its first part and then waits until the call is cancelled. gRPC's content type, so the proxy
    /// flushes that part to the backend at once (it would batch an ordinary body).
    /// </summary>
    private sealed class UnfinishedUpload : HttpContent
    {
        public UnfinishedUpload() => Headers.TryAddWithoutValidation("Content-Type", "application/grpc");

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
            SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken)
        {
            await stream.WriteAsync(System.Text.Encoding.ASCII.GetBytes("the first part of a longer upload"), cancellationToken);
            await stream.FlushAsync(cancellationToken);
            await Task.Delay(Timeout.Infinite, cancellationToken);
        }

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }

    /// <summary>The forwarder reported the client's outcome once, at Debug, without an exception (no stack trace).</summary>
    private static void AssertClientOutcomeAtDebug(CapturingLoggerProvider logs)
    {
        var outcome = Assert.Single(logs.Entries, e => e.Category.StartsWith("Proxy.Forwarding", StringComparison.Ordinal) && e.Message.StartsWith("Client-side outcome", StringComparison.Ordinal));
        Assert.Equal(LogLevel.Debug, outcome.Level);
        Assert.Null(outcome.Exception);
        Assert.Contains("route 'r1', cluster 'c1', destination 'd1'", outcome.Message);
    }

    private static void AssertOneWarningNamingTheRequest(CapturingLoggerProvider logs, string error)
    {
        var warning = Assert.Single(logs.Warnings);
        Assert.Equal(LogLevel.Warning, warning.Level);
        Assert.Contains(error, warning.Message);
        Assert.Contains("route 'r1', cluster 'c1', destination 'd1'", warning.Message);
    }

    /// <summary>A proxy with one route to <paramref name="backend"/>, every log entry captured, and a signal when its one request is over.</summary>
    private static async Task<LoggedProxy> StartProxyAsync(TestApp backend, TestProtocol client, Action<ProxyConfigDictionary>? extra = null)
    {
        var logs = new CapturingLoggerProvider();
        var completed = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url);
        extra?.Invoke(config);
        var app = await ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Logging.AddProvider(logs);
                b.Logging.SetMinimumLevel(LogLevel.Debug);
                b.Configuration.AddInMemoryCollection(config);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
                ProxyTestHost.NeedsPipeline(b.Services);
            },
            a =>
            {
                // OnCompleted runs after the server is done with the request, its own error logging included.
                a.Use((context, next) =>
                {
                    context.Response.OnCompleted(() =>
                    {
                        completed.TrySetResult();
                        return Task.CompletedTask;
                    });
                    return next(context);
                });
                a.MapProxyForwarding();
            },
            client);
        return new LoggedProxy(app, logs, completed.Task);
    }

    private sealed record LoggedProxy(TestApp App, CapturingLoggerProvider Logs, Task Completed) : IAsyncDisposable
    {
        public ValueTask DisposeAsync() => App.DisposeAsync();
    }
}
