using System.Collections.Concurrent;
using System.Diagnostics;
using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// The "Proxy.Forwarding" ActivitySource end to end: a client sends a traceparent, the proxy's Client span is a child of
/// the server span (the ASP.NET Core hosting activity, child of the client's), and the backend receives a traceparent
/// whose parent-id is the proxy span. Runs on Kestrel, on our server and on the native relay (the suite's three hosts).
/// </summary>
public sealed class TracingTests
{
    /// <summary>
    /// Listens to our source and to ASP.NET Core's hosting source, sampling only this test's trace: tests running in
    /// parallel (and their own listeners) neither see nor change each other's spans.
    /// </summary>
    // Shared: spans stop on any thread; the bags are concurrent.
    private sealed class TraceRecorder : IDisposable
    {
        private readonly ActivityListener _listener;

        public TraceRecorder(ActivityTraceId traceId, bool sample = true)
        {
            _listener = new ActivityListener
            {
                ShouldListenTo = source => source.Name is "Proxy.Forwarding" or "Microsoft.AspNetCore" or "System.Net.Http",
                Sample = (ref ActivityCreationOptions<ActivityContext> options) =>
                    sample && options.TraceId == traceId ? ActivitySamplingResult.AllDataAndRecorded : ActivitySamplingResult.None,
                ActivityStopped = activity =>
                {
                    if (activity.TraceId == traceId)
                    {
                        Stopped.Add(activity);
                        foreach (var (match, done) in _waiters)
                        {
                            if (match(activity))
                            {
                                done.TrySetResult(activity);
                            }
                        }
                    }
                },
            };
            ActivitySource.AddActivityListener(_listener);
        }

        private readonly ConcurrentBag<(Func<Activity, bool> Match, TaskCompletionSource<Activity> Done)> _waiters = [];

        public ConcurrentBag<Activity> Stopped { get; } = [];

        /// <summary>Completes when a span that matches has stopped (spans stop after the client saw the response).</summary>
        public async Task<Activity> WaitAsync(Func<Activity, bool> match)
        {
            var done = new TaskCompletionSource<Activity>(TaskCreationOptions.RunContinuationsAsynchronously);
            _waiters.Add((match, done));
            if (Stopped.FirstOrDefault(match) is { } seen)
            {
                return seen;
            }
            return await done.Task.WaitAsync(TimeSpan.FromSeconds(20));
        }

        public Task<Activity> ProxySpanAsync() => WaitAsync(a => a.Source.Name == "Proxy.Forwarding");

        public void Dispose() => _listener.Dispose();
    }

    private static (string TraceParent, ActivityTraceId TraceId, ActivitySpanId ClientSpan) NewClientContext()
    {
        var traceId = ActivityTraceId.CreateRandom();
        var spanId = ActivitySpanId.CreateRandom();
        return ($"00-{traceId}-{spanId}-01", traceId, spanId);
    }

    [Fact]
    public async Task ClientTraceparent_ProxySpanIsChildOfServerSpan_BackendSeesProxySpanAsParent()
    {
        var (traceParent, traceId, clientSpan) = NewClientContext();
        using var recorder = new TraceRecorder(traceId);
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend, requestCompleted: null);
        using var client = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/traced");
        request.Headers.TryAddWithoutValidation("traceparent", traceParent);
        request.Headers.TryAddWithoutValidation("tracestate", "client=1");

        using var response = await client.SendAsync(request);
        var echo = await response.ReadEchoAsync();

        var span = await recorder.ProxySpanAsync();
        Assert.Equal(ActivityKind.Client, span.Kind);
        Assert.Equal("GET", span.DisplayName);
        Assert.Equal("r1", span.GetTagItem("proxy.route"));
        Assert.Equal("c1", span.GetTagItem("proxy.cluster"));
        Assert.Equal("d1", span.GetTagItem("proxy.destination"));
        Assert.Equal(200, span.GetTagItem("http.response.status_code"));
        Assert.Null(span.GetTagItem("error.type"));

#if DIRECT_PATH
        // The direct path runs before ASP.NET Core's hosting layer, so there is no server span: the client's span is the parent.
        Assert.Equal(clientSpan, span.ParentSpanId);
#else
        // Its parent is the proxy's server span, whose parent is the client's span.
        var server = await recorder.WaitAsync(a => a.Source.Name == "Microsoft.AspNetCore" && a.SpanId == span.ParentSpanId);
        Assert.Equal(ActivityKind.Server, server.Kind);
        Assert.Equal(clientSpan, server.ParentSpanId);
#endif

        // The backend got the proxy span as parent (not the client's span), with the client's tracestate.
        Assert.Equal($"00-{traceId}-{span.SpanId}-01", echo.Headers["traceparent"]);
        Assert.Equal("client=1", echo.Headers["tracestate"]);
    }

    [Fact]
    public async Task NotSampled_NoProxySpan_ClientTraceparentReachesBackendUnchanged()
    {
        var (traceParent, traceId, _) = NewClientContext();
        // A listener that declines this trace: the source has listeners, yet no span is made.
        using var recorder = new TraceRecorder(traceId, sample: false);
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await Proxies.StartForAsync(backend);
        using var client = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/untraced");
        request.Headers.TryAddWithoutValidation("traceparent", traceParent);

        using var response = await client.SendAsync(request);
        var echo = await response.ReadEchoAsync();

        Assert.Equal(traceParent, echo.Headers["traceparent"]);
        Assert.Empty(recorder.Stopped);
    }

    [Fact]
    public async Task BackendDown_ProxySpanCarriesErrorType()
    {
        var (traceParent, traceId, _) = NewClientContext();
        using var recorder = new TraceRecorder(traceId);
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", Proxies.DeadAddress());
        await using var proxy = await Proxies.StartConfiguredAsync(config);
        using var client = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/down");
        request.Headers.TryAddWithoutValidation("traceparent", traceParent);

        using var response = await client.SendAsync(request);

        Assert.Equal(502, (int)response.StatusCode);
        var span = await recorder.ProxySpanAsync();
        Assert.Equal("Request", span.GetTagItem("error.type"));
        Assert.Equal(502, span.GetTagItem("http.response.status_code"));
        Assert.Equal(ActivityStatusCode.Error, span.Status);
    }

    /// <summary>
    /// IHttpForwarder with the caller's own HttpClient handler, whose propagator is on (unlike the clusters'): HttpClient's
    /// span (System.Net.Http, a child of ours) may take our place as the backend's parent, but the backend must get one
    /// traceparent, in our trace, whose parent is our span or that child of it; never two values, never the client's span.
    /// </summary>
    [Fact]
    public async Task CallerHandlerWithPropagator_BackendGetsOneTraceparentUnderProxySpan()
    {
        var (traceParent, traceId, clientSpan) = NewClientContext();
        using var recorder = new TraceRecorder(traceId);
        await using var backend = await Backends.StartEchoAsync();
        using var invoker = new HttpMessageInvoker(new SocketsHttpHandler { UseProxy = false });
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b => b.Services.AddProxyForwarding(),
            app => app.Run(async context => await context.RequestServices.GetRequiredService<IHttpForwarder>().SendAsync(context, backend.Url, invoker)));
        using var client = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/direct");
        request.Headers.TryAddWithoutValidation("traceparent", traceParent);

        using var response = await client.SendAsync(request);
        var echo = await response.ReadEchoAsync();

        var span = await recorder.ProxySpanAsync();
        var received = echo.Headers["traceparent"];
        Assert.DoesNotContain(",", received);
        var parts = received.Split('-');
        Assert.Equal(traceId.ToString(), parts[1]);
        Assert.NotEqual(clientSpan.ToString(), parts[2]);
        if (parts[2] != span.SpanId.ToString())
        {
            var httpClientSpan = await recorder.WaitAsync(a => a.Source.Name == "System.Net.Http" && a.SpanId.ToString() == parts[2]);
            Assert.Equal(span.SpanId, httpClientSpan.ParentSpanId);
        }
    }
}
