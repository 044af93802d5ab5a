using System.Diagnostics.Metrics;
using System.Net;
using System.Reflection;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Tests.Infrastructure;
using Proxy.Forwarding.Transforms;
using Proxy.Testing;

namespace Proxy.Forwarding.Tests;

public class DirectForwarderTests
{
    private sealed class TagTransformer : HttpTransformer
    {
        public override async ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
        {
            await base.TransformRequestAsync(httpContext, proxyRequest, destinationPrefix, cancellationToken);
            proxyRequest.Headers.TryAddWithoutValidation("x-direct", "1");
        }
    }

    [Fact]
    public async Task SendAsync_OneOffRoute_ForwardsWithCustomTransformer()
    {
        await using var backend = await Backends.StartEchoAsync();
        using var invoker = new HttpMessageInvoker(BackendPoolFactory.CreateHandler(new HttpClientConfig()));
        ForwarderError? outcome = null;
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b => b.Services.AddProxyForwarding(),
            app => app.Map("/direct/{**rest}", async context =>
            {
                var forwarder = context.RequestServices.GetRequiredService<IHttpForwarder>();
                outcome = await forwarder.SendAsync(context, backend.Url + "base/", invoker, ForwarderRequestConfig.Empty, new TagTransformer());
            }));
        using var http = proxy.CreateClient();

        var echo = await (await http.GetAsync("/direct/x?y=1")).ReadEchoAsync();

        Assert.Equal("/base/direct/x", echo.Path);
        Assert.Equal("?y=1", echo.Query);
        Assert.Equal("1", echo.Headers["x-direct"]);
        Assert.Equal(ForwarderError.None, outcome);
    }

    [Fact]
    public async Task SendAsync_BackendDown_ReturnsRequestErrorAndSetsFeature()
    {
        using var invoker = new HttpMessageInvoker(new SocketsHttpHandler());
        IForwarderErrorFeature? feature = null;
        ForwarderError? outcome = null;
        var dead = Proxies.DeadAddress();
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b => b.Services.AddProxyForwarding(),
            app => app.Run(async context =>
            {
                outcome = await context.RequestServices.GetRequiredService<IHttpForwarder>().SendAsync(context, dead, invoker);
                feature = context.Features.Get<IForwarderErrorFeature>();
            }));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/");

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
        Assert.Equal(ForwarderError.Request, outcome);
        Assert.Equal(ForwarderError.Request, feature!.Error);
        Assert.NotNull(feature.Exception);
    }

    [Fact]
    public async Task Metrics_RequestsAndErrors_RecordedOnProxyForwardingMeter()
    {
        var measurements = new List<(string Instrument, long Value, string? ErrorType, object? Scope)>();
        using var listener = new MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Proxy.Forwarding")
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<long>((instrument, value, tags, _) =>
        {
            string? error = null;
            foreach (var tag in tags)
            {
                if (tag.Key == "error.type")
                {
                    error = tag.Value as string;
                }
            }

            lock (measurements)
            {
                measurements.Add((instrument.Name, value, error, instrument.Meter.Scope));
            }
        });
        listener.Start();
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartConfiguredAsync(new ProxyConfigDictionary()
            .Route("ok", "good", "/ok").Destination("good", "d1", backend.Url)
            .Route("bad", "down", "/bad").Destination("down", "d1", Proxies.DeadAddress()));
        using var http = proxy.CreateClient();

        (await http.GetAsync("/ok")).Dispose();
        (await http.GetAsync("/bad")).Dispose();
        listener.RecordObservableInstruments(); // the request counts are read when collected

        // Other tests run in parallel with their own meter factories: keep only this proxy's meter.
        var scope = proxy.Services.GetRequiredService<IMeterFactory>();
        lock (measurements)
        {
            measurements.RemoveAll(m => !ReferenceEquals(m.Scope, scope));
            var requests = measurements.Where(m => m.Instrument == "proxy.forwarding.requests").ToList();
            Assert.Equal(2, requests.Sum(m => m.Value)); // one request of each kind, each reported once
            Assert.Equal(2, requests.Count);
            Assert.Contains(requests, m => m.ErrorType == "Request" && m.Value == 1);
            Assert.Contains(measurements, m => m.Instrument == "proxy.forwarding.errors" && m.ErrorType == "Request");
        }

        // Active requests is a level the meter reads when collected: each cluster reports it, back at 0.
        using var recorder = new MetricRecorder("Proxy.Forwarding", scope);
        foreach (var cluster in new[] { "good", "down" })
        {
            await recorder.WaitForCurrentAsync("proxy.forwarding.active_requests", v => v == 0, m => m.Tag("proxy.cluster") == cluster);
        }
    }

    [Fact]
    public void Architecture_ForwardingReferencesNoOtherProxyAssembly()
    {
        var references = typeof(IHttpForwarder).Assembly.GetReferencedAssemblies().Select(a => a.Name!).ToArray();

        Assert.DoesNotContain(references, r => r.StartsWith("Proxy.", StringComparison.Ordinal));
        Assert.Contains(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
    }
}
