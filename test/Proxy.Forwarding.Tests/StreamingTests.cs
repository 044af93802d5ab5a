using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Time.Testing;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

public class StreamingTests
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(10);

    [Theory]
    [InlineData(TestProtocol.Http1, false)]
    [InlineData(TestProtocol.Http2, true)]
    public async Task Sse_EachEvent_ArrivesBeforeBackendWritesTheNext(TestProtocol client, bool h2cBackend)
    {
        var signals = Enumerable.Range(0, 3).Select(_ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously)).ToArray();
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "text/event-stream";
            for (var i = 0; i < signals.Length; i++)
            {
                await context.Response.WriteAsync($"data: {i}\n\n");
                await context.Response.Body.FlushAsync();
                // The next event is written only after the client saw this one.
                await signals[i].Task.WaitAsync(context.RequestAborted);
            }
        }), h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await Proxies.StartForAsync(backend, client, h2cBackend);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());

        Assert.Equal("text/event-stream", response.Content.Headers.ContentType!.MediaType);
        for (var i = 0; i < signals.Length; i++)
        {
            Assert.Equal($"data: {i}", await reader.ReadLineAsync().WaitAsync(Guard));
            Assert.Equal("", await reader.ReadLineAsync().WaitAsync(Guard));
            signals[i].SetResult();
        }

        Assert.Null(await reader.ReadLineAsync().WaitAsync(Guard));
    }

    [Theory]
    [InlineData(TestProtocol.Http1, false)]
    [InlineData(TestProtocol.Http2, true)]
    public async Task HeadersFirst_BackendFlushesHeadersThenWaits_ClientSeesHeaders(TestProtocol client, bool h2cBackend)
    {
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.Headers["x-first"] = "yes";
            await context.Response.StartAsync();
            await context.Response.Body.FlushAsync();
            await release.Task.WaitAsync(context.RequestAborted);
            await context.Response.WriteAsync("done");
        }), h2cBackend ? TestProtocol.Http2 : TestProtocol.Http1);
        await using var proxy = await Proxies.StartForAsync(backend, client, h2cBackend);
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);

        Assert.Equal("yes", response.Headers.GetValues("x-first").Single());
        release.SetResult();
        Assert.Equal("done", await response.Content.ReadAsStringAsync().WaitAsync(Guard));
    }

    [Fact]
    public async Task GrpcBidi_ServerSendsHeadersBeforeReadingBody_NoDeadlock()
    {
        // YARP #2520: the proxy must not wait for a response body byte (or the request body) before
        // sending the response headers.
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "application/grpc";
            await context.Response.StartAsync();
            await context.Response.Body.FlushAsync();
            var body = await new StreamReader(context.Request.Body).ReadToEndAsync();
            await context.Response.WriteAsync("echo:" + body);
            context.Response.AppendTrailer("grpc-status", "0");
        }), TestProtocol.Http2);
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true);
        using var http = proxy.CreateClient();
        var content = new DuplexContent("application/grpc");
        using var request = new HttpRequestMessage(HttpMethod.Post, "/svc/Bidi") { Content = content, Version = HttpVersion.Version20, VersionPolicy = HttpVersionPolicy.RequestVersionExact };

        using var response = await http.SendAsync(request, HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);

        Assert.Equal("application/grpc", response.Content.Headers.ContentType!.MediaType);
        await content.WriteAsync("ping");
        content.Complete();
        Assert.Equal("echo:ping", await response.Content.ReadAsStringAsync().WaitAsync(Guard));
        Assert.Equal("0", response.TrailingHeaders.GetValues("grpc-status").Single());
    }

    [Fact]
    public async Task GrpcDuplex_EachRequestMessage_FlushedToBackendAndEchoedBeforeTheNext()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "application/grpc";
            var buffer = new byte[1024];
            int read;
            while ((read = await context.Request.Body.ReadAsync(buffer)) > 0)
            {
                await context.Response.Body.WriteAsync(buffer.AsMemory(0, read));
                await context.Response.Body.FlushAsync();
            }

            context.Response.AppendTrailer("grpc-status", "0");
        }), TestProtocol.Http2);
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true);
        using var http = proxy.CreateClient();
        var content = new DuplexContent("application/grpc+proto");
        using var request = new HttpRequestMessage(HttpMethod.Post, "/svc/Duplex") { Content = content, Version = HttpVersion.Version20, VersionPolicy = HttpVersionPolicy.RequestVersionExact };
        var responseTask = http.SendAsync(request, HttpCompletionOption.ResponseHeadersRead);

        await content.WriteAsync("m1");
        using var response = await responseTask.WaitAsync(Guard);
        var stream = await response.Content.ReadAsStreamAsync();
        Assert.Equal("m1", await ReadExactlyAsync(stream, 2));
        await content.WriteAsync("m2");
        Assert.Equal("m2", await ReadExactlyAsync(stream, 2));
        content.Complete();

        Assert.Equal(0, await stream.ReadAsync(new byte[1]).AsTask().WaitAsync(Guard));
        Assert.Equal("0", response.TrailingHeaders.GetValues("grpc-status").Single());
    }

    [Fact]
    public async Task Trailers_OverHttp2_PassedThrough()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "application/grpc";
            await context.Response.WriteAsync("payload");
            context.Response.AppendTrailer("grpc-status", "0");
            context.Response.AppendTrailer("grpc-message", "fine");
            context.Response.AppendTrailer("x-custom-trailer", "t1");
        }), TestProtocol.Http2);
        await using var proxy = await Proxies.StartForAsync(backend, TestProtocol.Http2, h2cBackend: true);
        using var http = proxy.CreateClient();

        using var response = await http.PostAsync("/svc/Unary", new ByteArrayContent([0, 0, 0, 0, 0]) { Headers = { { "Content-Type", "application/grpc" } } });
        Assert.Equal("payload", await response.Content.ReadAsStringAsync());

        Assert.Equal("0", response.TrailingHeaders.GetValues("grpc-status").Single());
        Assert.Equal("fine", response.TrailingHeaders.GetValues("grpc-message").Single());
        Assert.Equal("t1", response.TrailingHeaders.GetValues("x-custom-trailer").Single());
    }

    // NOTE: on a FakeTimeProvider that only this test moves. On the wall clock (0.25 s default), a loaded machine once
    // took longer than that to bring the event stream's response head back, and the proxy rightly answered 504 before
    // it knew the response was an event stream: the race was the test's, not the proxy's.
    [Fact]
    public async Task Sse_DefaultActivityTimeout_DoesNotApplyToEventStreams()
    {
        var plainArrived = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var sendSecondEvent = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = await ProxyTestHost.StartBackendAsync(app =>
        {
            app.MapGet("/events", async context =>
            {
                context.Response.ContentType = "text/event-stream";
                await context.Response.WriteAsync("data: 0\n\n");
                await context.Response.Body.FlushAsync();
                // Quiet for longer than the default activity timeout: the test moves the proxy's clock past it first.
                await sendSecondEvent.Task.WaitAsync(context.RequestAborted);
                await context.Response.WriteAsync("data: 1\n\n");
            });
            app.MapGet("/plain", async context =>
            {
                plainArrived.TrySetResult();
                await Task.Delay(Timeout.Infinite, context.RequestAborted);
            });
        });
        var time = new FakeTimeProvider();
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url);
        await using var proxy = await Proxies.StartConfiguredAsync(config, configure: b => b.Services.AddSingleton<TimeProvider>(time));
        // Short of the servers' own 30 s timeouts, which may share the fake clock.
        ((HttpForwarder)proxy.Services.GetRequiredService<IHttpForwarder>()).DefaultActivityTimeout = TimeSpan.FromSeconds(10);
        using var http = proxy.CreateClient();

        var plain = http.GetAsync("/plain");
        using var events = await http.GetAsync("/events", HttpCompletionOption.ResponseHeadersRead).WaitAsync(Guard);
        using var reader = new StreamReader(await events.Content.ReadAsStreamAsync());
        Assert.Equal("data: 0", await reader.ReadLineAsync().WaitAsync(Guard));
        Assert.Equal("", await reader.ReadLineAsync().WaitAsync(Guard));
        await plainArrived.Task.WaitAsync(Guard);

        time.Advance(TimeSpan.FromSeconds(11));
        using var plainResponse = await plain.WaitAsync(Guard);
        Assert.Equal(HttpStatusCode.GatewayTimeout, plainResponse.StatusCode);

        sendSecondEvent.SetResult();
        Assert.Equal("data: 1\n\n", await reader.ReadToEndAsync().WaitAsync(Guard));
    }

    // NOTE: the activity timeout runs on a FakeTimeProvider that only this test moves. On the wall clock (0.3 s), a
    // loaded machine sometimes relayed the first event later than that, and the proxy rightly aborted the stream before
    // the test read it: the race was the test's, not the proxy's.
    [Fact]
    public async Task Sse_ConfiguredActivityTimeout_AbortsQuietStream()
    {
        await using var backend = await ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            context.Response.ContentType = "text/event-stream";
            await context.Response.WriteAsync("data: 0\n\n");
            await context.Response.Body.FlushAsync();
            await Task.Delay(Timeout.Infinite, context.RequestAborted);
        }));
        var time = new FakeTimeProvider();
        // Short of the servers' own 30 s timeouts, which may share the fake clock.
        var config = new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", backend.Url)
            .Set("Clusters:c1:HttpRequest:ActivityTimeout", "00:00:10");
        await using var proxy = await Proxies.StartConfiguredAsync(config, configure: b => b.Services.AddSingleton<TimeProvider>(time));
        using var http = proxy.CreateClient();

        using var response = await http.GetAsync("/", HttpCompletionOption.ResponseHeadersRead);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
        Assert.Equal("data: 0", await reader.ReadLineAsync().WaitAsync(Guard));
        Assert.Equal("", await reader.ReadLineAsync().WaitAsync(Guard));

        // The client stream is aborted (not ended cleanly) once the stream stays quiet past the timeout.
        var rest = reader.ReadToEndAsync();
        time.Advance(TimeSpan.FromSeconds(11));
        await Assert.ThrowsAnyAsync<IOException>(() => rest.WaitAsync(Guard));
    }

    private static async Task<string> ReadExactlyAsync(Stream stream, int count)
    {
        var buffer = new byte[count];
        await stream.ReadExactlyAsync(buffer).AsTask().WaitAsync(Guard);
        return System.Text.Encoding.UTF8.GetString(buffer);
    }
}
