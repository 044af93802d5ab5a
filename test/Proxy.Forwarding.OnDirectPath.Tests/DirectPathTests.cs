using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Forwarding.Tests.Infrastructure;
using Proxy.Testing;

namespace Proxy.Forwarding.Tests;

/// <summary>
/// What only the direct path does: a request of an eligible route skips the pipeline (middleware does not see it), while a
/// route that needs the pipeline, an endpoint of the app, and a request endpoint routing ranks otherwise still go through it.
/// The rest of this suite (the whole forwarding suite, recompiled) shows direct requests get the pipeline's answers.
/// </summary>
public class DirectPathTests
{
    /// <summary>A proxy whose pipeline marks every response it sees with x-pipeline, plus an endpoint of its own at /local/{name}.</summary>
    private static Task<TestApp> StartAsync(ProxyConfigDictionary config, TestProtocol protocol = TestProtocol.Http1) =>
        ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Configuration.AddInMemoryCollection(config);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            },
            app =>
            {
                app.Use((context, next) =>
                {
                    context.Response.Headers["x-pipeline"] = "1";
                    return next(context);
                });
                app.MapGet("/local/{name}", (string name) => "local " + name);
                app.MapProxyForwarding();
            },
            protocol);

    private static ProxyConfigDictionary OneRoute(TestApp backend, bool h2cBackend = false)
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url);
        return h2cBackend ? config.H2c("c1") : config;
    }

    [Theory]
    [InlineData(TestProtocol.Http1, false)]
    [InlineData(TestProtocol.Http2, true)]
    public async Task EligibleRoute_SkipsThePipeline_AndStillForwards(TestProtocol client, bool h2cBackend)
    {
        await using var backend = await Backends.StartEchoAsync(h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await StartAsync(OneRoute(backend, h2cBackend), client);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/a/b%20c?x=1");
        var echo = await response.ReadEchoAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal("/a/b c", echo.Path);
        Assert.Equal("?x=1", echo.Query);
        Assert.Equal("127.0.0.1", echo.Headers["x-forwarded-for"]);
        Assert.False(response.Headers.Contains("x-pipeline"), "the direct path should have skipped the middleware");
        Assert.True(response.Headers.Date.HasValue);
        Assert.Equal("Kestrel", response.Headers.Server.ToString()); // the backend's, as on the pipeline
    }

    [Fact]
    public async Task DestinationAtItsLimit_RequestQueuesOnTheDestinationPickedForIt()
    {
        // A direct request starts at once when its destination has a free slot; one whose slot is taken waits in that
        // destination's queue. It is picked once: round robin over two destinations, the third request goes where the
        // first still holds the only slot, and waits for it rather than being sent to the other one.
        var held = new[] { new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously), new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously) };
        var entered = new[] { new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously), new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously) };
        var backends = new TestApp[2];
        for (var i = 0; i < 2; i++)
        {
            var index = i;
            backends[i] = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
            {
                if (context.Request.Path == "/hold")
                {
                    entered[index].TrySetResult();
                    await held[index].Task.WaitAsync(context.RequestAborted);
                }
                await context.Response.WriteAsync("b" + index);
            }));
        }
        await using var b0 = backends[0];
        await using var b1 = backends[1];
        var config = new ProxyConfigDictionary().Route("r1", "c1")
            .Destination("c1", "d1", backends[0].Url).Destination("c1", "d2", backends[1].Url)
            .Set("Clusters:c1:LoadBalancingPolicy", "RoundRobin")
            .Set("Clusters:c1:HttpClient:MaxConcurrentRequestsPerDestination", "1")
            .Set("Clusters:c1:HttpClient:QueueTimeout", "00:01:00");
        await using var proxy = await StartAsync(config);
        using var metrics = new MetricRecorder("Proxy.Forwarding", proxy.Services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>());
        using var http = proxy.CreateClient();

        var first = http.GetAsync("/hold");
        var holder = await Task.WhenAny(entered[0].Task, entered[1].Task).WaitAsync(TimeSpan.FromSeconds(30)) == entered[0].Task ? 0 : 1;
        using var second = await http.GetAsync("/x").WaitAsync(TimeSpan.FromSeconds(30));
        var third = http.GetAsync("/x");
        // Queued behind the holder's slot before the slot is freed, so the release cannot decide where it goes.
        await metrics.WaitAsync("proxy.forwarding.pool.queue_length",
            m => m.Value == 1 && m.Tag("proxy.destination") == (holder == 0 ? "d1" : "d2"), TimeSpan.FromSeconds(30));
        held[holder].SetResult();

        Assert.Equal("b" + (1 - holder), await second.Content.ReadAsStringAsync());
        using var thirdResponse = await third.WaitAsync(TimeSpan.FromSeconds(30));
        Assert.Equal("b" + holder, await thirdResponse.Content.ReadAsStringAsync());
        Assert.False(thirdResponse.Headers.Contains("x-pipeline"));
        (await first.WaitAsync(TimeSpan.FromSeconds(30))).Dispose();
    }

    [Fact]
    public async Task AppEndpoint_OutranksTheCatchAllRoute_AndRunsOnThePipeline()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await StartAsync(OneRoute(backend));
        using var http = proxy.CreateClient();

        using var local = await http.GetAsync("/local/x");
        using var proxied = await http.GetAsync("/localx");

        Assert.Equal("local x", await local.Content.ReadAsStringAsync());
        Assert.True(local.Headers.Contains("x-pipeline"));
        Assert.Equal("/localx", (await proxied.ReadEchoAsync()).Path);
        Assert.False(proxied.Headers.Contains("x-pipeline"));
    }

    [Theory]
    [InlineData(TestProtocol.Http1, "1.1")]
    [InlineData(TestProtocol.Http2, "2")]
    public async Task DirectRequest_CountedInTheServersRequestDuration_AsThePipelineCountsItsOwn(TestProtocol client, string version)
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await StartAsync(OneRoute(backend), client);
        var factory = proxy.Services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>();
        var measured = new System.Collections.Concurrent.ConcurrentQueue<(object Instrument, Dictionary<string, object?> Tags)>();
        var two = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            // This app's hosting instrument only: other tests' apps run in the same process.
            if (instrument.Name == "http.server.request.duration" && instrument.Meter.Name == "Microsoft.AspNetCore.Hosting"
                && ReferenceEquals(instrument.Meter.Scope, factory))
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<double>((instrument, _, tags, _) =>
        {
            var copy = new Dictionary<string, object?>();
            foreach (var tag in tags)
            {
                copy[tag.Key] = tag.Value;
            }
            measured.Enqueue((instrument, copy));
            if (measured.Count >= 2)
            {
                two.TrySetResult();
            }
        });
        listener.Start();
        using var http = proxy.CreateClient();

        using var proxied = await http.GetAsync("/a");
        using var local = await http.GetAsync("/local/x");
        await two.Task.WaitAsync(TimeSpan.FromSeconds(30));

        Assert.False(proxied.Headers.Contains("x-pipeline"), "the proxied request should have gone direct");
        Assert.True(local.Headers.Contains("x-pipeline"));
        var byRoute = measured.ToDictionary(m => (string?)m.Tags.GetValueOrDefault("http.route") ?? "", m => m);
        var direct = byRoute["/{**catch-all}"];
        var pipeline = byRoute["/local/{name}"];
        Assert.Same(pipeline.Instrument, direct.Instrument); // the hosting layer's instrument itself, not one of the same name
        Assert.Equal(pipeline.Tags.Keys.Order(), direct.Tags.Keys.Order());
        Assert.Equal("http", direct.Tags["url.scheme"]);
        Assert.Equal("GET", direct.Tags["http.request.method"]);
        Assert.Equal(version, direct.Tags["network.protocol.version"]);
        Assert.Equal(version, pipeline.Tags["network.protocol.version"]);
        Assert.Equal(200, direct.Tags["http.response.status_code"]);
        Assert.Equal(pipeline.Tags["http.response.status_code"], direct.Tags["http.response.status_code"]);
    }

    [Theory]
    [InlineData("Timeout", "00:00:30")]                        // a policy the pipeline applies
    [InlineData("Transforms:0:PathPattern", "/p/{**catch-all}")] // a transform that reads route values
    public async Task RouteThatNeedsThePipeline_GoesThroughIt(string key, string value)
    {
        await using var backend = await Backends.StartEchoAsync();
        var config = OneRoute(backend).Set("Routes:r1:" + key, value);
        await using var proxy = await StartAsync(config);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/q");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.True(response.Headers.Contains("x-pipeline"));
    }

    [Fact]
    public async Task RouteWithHeaderMatcher_LeftToEndpointRouting()
    {
        await using var backend = await Backends.StartEchoAsync();
        var config = OneRoute(backend)
            .Route("special", "c1", "/{**catch-all}")
            .Set("Routes:special:Match:Headers:0:Name", "x-special")
            .Set("Routes:special:Match:Headers:0:Values:0", "1")
            .Set("Routes:special:Transforms:0:RequestHeader", "x-route")
            .Set("Routes:special:Transforms:0:Set", "special");
        await using var proxy = await StartAsync(config);
        using var http = proxy.CreateClient();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/s");
        request.Headers.Add("x-special", "1");

        using var response = await http.SendAsync(request);

        // Endpoint routing prefers the route with the header match; the direct path must not take the request from it.
        Assert.Equal("special", (await response.ReadEchoAsync()).Headers["x-route"]);
        Assert.True(response.Headers.Contains("x-pipeline"));
    }

    [Fact]
    public async Task Reload_ARouteTheReloadAdds_GoesDirectOnceTheTableIsRebuilt_EveryAnswerRightMeanwhile()
    {
        // HTTP/2 in front: its streams are decided on the epoll threads, which never build the table themselves; a change
        // of the endpoints starts the rebuild on the pool, and until it is done the pipeline answers.
        await using var backend = await Backends.StartEchoAsync(TestProtocol.Http2);
        var config = new ProxyConfigDictionary().Route("r1", "c1", "/a/{**rest}").Destination("c1", "d1", backend.Url).H2c("c1");
        await using var proxy = await StartAsync(config, TestProtocol.Http2);
        using var http = proxy.CreateClient();
        var manager = proxy.Services.GetRequiredService<Proxy.Forwarding.Configuration.ProxyStateManager>();
        using (var before = await http.GetAsync("/b/x"))
        {
            Assert.Equal(HttpStatusCode.NotFound, before.StatusCode);
        }

        var attempt = manager.NextReloadAttempt;
        proxy.App.Configuration["ReverseProxy:Routes:r2:ClusterId"] = "c1";
        proxy.App.Configuration["ReverseProxy:Routes:r2:Match:Path"] = "/b/{**rest}";
        ((IConfigurationRoot)proxy.App.Configuration).Reload();
        await attempt.WaitAsync(TimeSpan.FromSeconds(30));

        var tookPipeline = 0;
        for (var i = 0; ; i++)
        {
            using var response = await http.GetAsync("/b/x" + i);
            var echo = await response.ReadEchoAsync();
            Assert.Equal(HttpStatusCode.OK, response.StatusCode);
            Assert.Equal("/b/x" + i, echo.Path);
            if (!response.Headers.Contains("x-pipeline"))
            {
                break; // direct
            }
            Assert.True(++tookPipeline < 1000, "the route the reload added never went direct");
        }
    }

    [Fact]
    public async Task DeadDestination_502FromTheDirectPath()
    {
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", Proxies.DeadAddress());
        await using var proxy = await StartAsync(config);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/x");

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
        Assert.False(response.Headers.Contains("x-pipeline"));
    }

    [Fact]
    public async Task CorsPreflight_ForARouteWithAPolicy_AnsweredByTheCorsMiddleware_NotForwardedByTheCatchAll()
    {
        await using var backend = await PolicyApps.StartCountingBackendAsync();
        var config = new ProxyConfigDictionary().Destination("c1", "d1", backend.Url)
            .Route("api", "c1", "/api/{**rest}").Set("Routes:api:CorsPolicy", PolicyApps.Partners).Set("Routes:api:Match:Methods:0", "PUT")
            .Route("all", "c1", "/{**catch-all}");
        await using var proxy = await PolicyApps.StartAsync(config);
        using var http = proxy.CreateClient();
        using var preflight = new HttpRequestMessage(HttpMethod.Options, "/api/x");
        preflight.Headers.Add("Origin", PolicyApps.PartnerOrigin);
        preflight.Headers.Add("Access-Control-Request-Method", "PUT");

        using var response = await http.SendAsync(preflight);

        // Endpoint routing matches the preflight to the api route (by the method it asks about); its CORS policy answers.
        Assert.Equal(HttpStatusCode.NoContent, response.StatusCode);
        Assert.Equal(PolicyApps.PartnerOrigin, response.Headers.GetValues("Access-Control-Allow-Origin").Single());
    }

    [Fact]
    public async Task AppWithAGlobalRateLimiter_RoutesStayOnThePipeline()
    {
        await using var backend = await Backends.StartEchoAsync();
        await using var proxy = await ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Configuration.AddInMemoryCollection(OneRoute(backend));
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
                b.Services.AddRateLimiter(o =>
                {
                    o.GlobalLimiter = System.Threading.RateLimiting.PartitionedRateLimiter.Create<HttpContext, string>(_ =>
                        System.Threading.RateLimiting.RateLimitPartition.GetFixedWindowLimiter("all",
                            _ => new System.Threading.RateLimiting.FixedWindowRateLimiterOptions { PermitLimit = 1, QueueLimit = 0, Window = TimeSpan.FromHours(1) }));
                    o.RejectionStatusCode = 429;
                });
            },
            app =>
            {
                app.UseRateLimiter();
                app.MapProxyForwarding();
            });
        using var http = proxy.CreateClient();

        using var first = await http.GetAsync("/x");
        using var second = await http.GetAsync("/x");

        // One request per hour: only the pipeline's rate limiting middleware can answer the second with 429.
        Assert.Equal(HttpStatusCode.OK, first.StatusCode);
        Assert.Equal(HttpStatusCode.TooManyRequests, second.StatusCode);
    }
}
