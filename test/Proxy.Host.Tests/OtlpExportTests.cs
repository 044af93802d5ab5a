using System.Collections.Concurrent;
using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using OpenTelemetry.Metrics;

namespace Proxy.Host.Tests;

/// <summary>OpenTelemetry:Otlp:*: metrics and traces leave for an OTLP/HTTP receiver (a fake one in this test), configured, not coded.</summary>
public sealed class OtlpExportTests
{
    [Fact]
    public async Task OtlpEndpoint_HttpProtobuf_ReceiverGetsMetricsAndTraces()
    {
        await using var receiver = await FakeOtlpReceiver.StartAsync();
        await using var runner = await HostRunner.StartAsync(
            $"--OpenTelemetry:Otlp:Endpoint={receiver.Address}",
            "--OpenTelemetry:Otlp:Protocol=http/protobuf",
            // The SDK reads the standard variables from configuration too: export every 200 ms instead of every minute / 5 s.
            "--OTEL_METRIC_EXPORT_INTERVAL=200",
            "--OTEL_BSP_SCHEDULE_DELAY=200");
        using var client = new HttpClient();

        using var response = await client.GetAsync(new Uri(runner.Http, "/")); // a span for the trace exporter
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);

        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        var metrics = await receiver.WaitForAsync("/v1/metrics").WaitAsync(timeout.Token);
        var traces = await receiver.WaitForAsync("/v1/traces").WaitAsync(timeout.Token);
        Assert.Equal("application/x-protobuf", metrics.ContentType);
        Assert.True(metrics.Length > 0);
        Assert.Equal("application/x-protobuf", traces.ContentType);
        Assert.True(traces.Length > 0);
    }

    [Fact]
    public async Task NoAdminNoOtlp_NoOpenTelemetrySdk()
    {
        await using var runner = await HostRunner.StartAsync("--Admin:Enabled=false");

        Assert.Null(runner.Host.App.Services.GetService<MeterProvider>());
    }

    /// <summary>Accepts any OTLP/HTTP POST and lets a test await the first one on a path.</summary>
    private sealed class FakeOtlpReceiver : IAsyncDisposable
    {
        private readonly ConcurrentDictionary<string, TaskCompletionSource<(string? ContentType, long Length)>> _received = new();
        private WebApplication _app = null!;

        public Uri Address { get; private set; } = null!;

        public static async Task<FakeOtlpReceiver> StartAsync()
        {
            var receiver = new FakeOtlpReceiver();
            var builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [] });
            builder.Logging.ClearProviders();
            builder.WebHost.UseUrls("http://127.0.0.1:0");
            receiver._app = builder.Build();
            receiver._app.MapPost("/v1/{signal}", async (HttpContext context, string signal) =>
            {
                using var body = new MemoryStream();
                await context.Request.Body.CopyToAsync(body);
                receiver.Slot("/v1/" + signal).TrySetResult((context.Request.ContentType, body.Length));
                return Results.Ok();
            });
            await receiver._app.StartAsync();
            receiver.Address = new Uri(receiver._app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First());
            return receiver;
        }

        public Task<(string? ContentType, long Length)> WaitForAsync(string path) => Slot(path).Task;

        private TaskCompletionSource<(string? ContentType, long Length)> Slot(string path) =>
            _received.GetOrAdd(path, _ => new(TaskCreationOptions.RunContinuationsAsynchronously));

        public async ValueTask DisposeAsync()
        {
            await _app.StopAsync();
            await _app.DisposeAsync();
        }
    }
}
