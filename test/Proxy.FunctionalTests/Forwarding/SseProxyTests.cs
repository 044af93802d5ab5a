using System.Collections.Concurrent;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Threading.Channels;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// SSE endpoints on Kestrel behind the proxy: <c>/h1/...</c> reaches the backend over HTTP/1.1, <c>/h2/...</c> over
/// h2c. Both servers allow 1,100 streams per HTTP/2 connection.
/// </summary>
// Shared by the tests of one class; every member is thread-safe.
public class SseProxyFixture : ProxyFixture
{
    public const int StreamLimit = 1100;

    private readonly ConcurrentDictionary<string, Channel<int>> _permits = new();
    private readonly ConcurrentDictionary<string, TaskCompletionSource> _aborted = new();
    private readonly ConcurrentDictionary<string, FanGroup> _fans = new();

    protected override int? MaxConcurrentStreams => StreamLimit;

    /// <summary>Lets the step stream <paramref name="id"/> write its next event.</summary>
    public void AllowNextEvent(string id) => Permits(id).Writer.TryWrite(0);

    /// <summary>Completes when the backend saw RequestAborted on the abort stream <paramref name="id"/>.</summary>
    public Task BackendAborted(string id) => Aborted(id).Task;

    /// <summary>The fan-out streams of <paramref name="group"/> as the backend saw them.</summary>
    public FanGroup Fan(string group) => _fans.GetOrAdd(group, _ => new FanGroup());

    private Channel<int> Permits(string id) => _permits.GetOrAdd(id, _ => Channel.CreateUnbounded<int>());

    private TaskCompletionSource Aborted(string id) =>
        _aborted.GetOrAdd(id, _ => new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously));

    protected override void MapBackend(WebApplication app)
    {
        // Writes event i only when the test allowed it, after reading event i-1 at the client.
        app.MapGet("/sse/step/{id}", async (HttpContext context, string id) =>
        {
            StartEventStream(context);
            var permits = Permits(id).Reader;
            for (var i = 0; i < 3; i++)
            {
                await permits.ReadAsync(context.RequestAborted);
                await context.Response.WriteAsync($"data: {i}\n\n", context.RequestAborted);
                await context.Response.Body.FlushAsync(context.RequestAborted);
            }
        });

        // One event naming the stream, then open until the client leaves.
        app.MapGet("/sse/fan/{group}/{id}", async (HttpContext context, string group, string id) =>
        {
            var fan = Fan(group);
            fan.Opened();
            try
            {
                StartEventStream(context);
                await context.Response.WriteAsync($"data: {id}\n\n", context.RequestAborted);
                await context.Response.Body.FlushAsync(context.RequestAborted);
                await Task.Delay(Timeout.Infinite, context.RequestAborted);
            }
            catch (OperationCanceledException)
            {
                // The client left: what this endpoint waits for.
            }
            finally
            {
                fan.Closed();
            }
        });

        // One event, then records when RequestAborted fires.
        app.MapGet("/sse/abort/{id}", async (HttpContext context, string id) =>
        {
            using var registration = context.RequestAborted.Register(() => Aborted(id).TrySetResult());
            StartEventStream(context);
            await context.Response.WriteAsync("data: ready\n\n");
            await context.Response.Body.FlushAsync();
            await Aborted(id).Task;
        });
    }

    private static void StartEventStream(HttpContext context)
    {
        context.Response.ContentType = "text/event-stream";
        context.Response.Headers.CacheControl = "no-cache";
    }

    protected override void Configure(ReverseProxyKeys config, TestHost backend)
    {
        config.Route("h1", "h1", "/h1/{**rest}").RouteSet("h1", "Transforms:0:PathRemovePrefix", "/h1")
            .Destination("h1", backend.HttpAddress.ToString());
        config.Route("h2", "h2", "/h2/{**rest}").RouteSet("h2", "Transforms:0:PathRemovePrefix", "/h2")
            .Destination("h2", backend.H2cAddress.ToString()).H2c("h2");
    }

    /// <summary>Counts of the fan-out streams of one group, at the backend.</summary>
    // Thread-safe: counters are interlocked, the drain signal is a TaskCompletionSource.
    public sealed class FanGroup
    {
        private int _opened;
        private int _active;
        private readonly TaskCompletionSource _drained = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public int OpenedCount => Volatile.Read(ref _opened);

        /// <summary>Completes when every opened stream was closed again (after at least one opened).</summary>
        public Task Drained => _drained.Task;

        internal void Opened()
        {
            Interlocked.Increment(ref _opened);
            Interlocked.Increment(ref _active);
        }

        internal void Closed()
        {
            if (Interlocked.Decrement(ref _active) == 0)
            {
                _drained.TrySetResult();
            }
        }
    }
}

/// <summary>The same with the direct path on our server (AddDirectPath): the SSE streams skip the pipeline.</summary>
// Shared by the tests of one class; every member is thread-safe.
public sealed class SseDirectProxyFixture : SseProxyFixture
{
    protected override bool DirectPath => true;
}

/// <summary>SSE through the proxy, hosted on Kestrel and on our server, to HTTP/1.1 and h2c backends.</summary>
public sealed class SseProxyTests(SseProxyFixture fixture) : SseProxyCases(fixture), IClassFixture<SseProxyFixture>;

/// <summary>The same cases with the direct path on our server: every stream behaves as through the pipeline.</summary>
public sealed class SseDirectProxyTests(SseDirectProxyFixture fixture) : SseProxyCases(fixture), IClassFixture<SseDirectProxyFixture>;

/// <summary>The SSE cases through a proxy fixture.</summary>
public abstract class SseProxyCases(SseProxyFixture fixture)
{
    /// <summary>Turns a hang into a failure; the tests never wait this long when the proxy works.</summary>
    private static readonly TimeSpan s_bound = TimeSpan.FromSeconds(10);

    public static TheoryData<ServerKind, HttpTransport, string> Cases()
    {
        var data = new TheoryData<ServerKind, HttpTransport, string>();
        foreach (var kind in Enum.GetValues<ServerKind>())
        {
            foreach (var transport in new[] { HttpTransport.Http2Tls, HttpTransport.Http11Cleartext })
            {
                data.Add(kind, transport, "h1");
                data.Add(kind, transport, "h2");
            }
        }

        return data;
    }

    private static async Task<string> ReadEventAsync(StreamReader reader)
    {
        var data = await reader.ReadLineAsync().WaitAsync(s_bound);
        var blank = await reader.ReadLineAsync().WaitAsync(s_bound);
        Assert.Equal("", blank);
        Assert.NotNull(data);
        return data!;
    }

    private static HttpRequestMessage Get(string path, HttpTransport transport) =>
        new(HttpMethod.Get, path) { Version = transport.Version(), VersionPolicy = HttpVersionPolicy.RequestVersionExact };

    [Theory]
    [MemberData(nameof(Cases))]
    public async Task Events_EachArrivesBeforeTheBackendWritesTheNext(ServerKind kind, HttpTransport transport, string backend)
    {
        using var client = TestClients.Create(await fixture.ProxyAsync(kind), transport);
        var id = Guid.NewGuid().ToString("N");
        fixture.AllowNextEvent(id);

        using var response = await client.SendAsync(Get($"/{backend}/sse/step/{id}", transport), HttpCompletionOption.ResponseHeadersRead)
            .WaitAsync(s_bound);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType?.MediaType);
        for (var i = 0; i < 3; i++)
        {
            // The backend writes event i+1 only after this read: a buffering proxy never delivers event i.
            Assert.Equal($"data: {i}", await ReadEventAsync(reader));
            fixture.AllowNextEvent(id);
        }

        Assert.Null(await reader.ReadLineAsync().WaitAsync(s_bound));
    }

    [Theory]
    [MemberData(nameof(Cases))]
    public async Task ClientDisconnect_AfterFirstEvent_BackendRequestAborted(ServerKind kind, HttpTransport transport, string backend)
    {
        var id = Guid.NewGuid().ToString("N");
        // NOTE: no response draining: by default SocketsHttpHandler reads an abandoned HTTP/1.1 body for up to 2 s
        // before it closes the connection, which would measure the client, not the proxy.
        using (var client = TestClients.Create(await fixture.ProxyAsync(kind), transport, configure: h => h.MaxResponseDrainSize = 0))
        {
            using var response = await client.SendAsync(Get($"/{backend}/sse/abort/{id}", transport), HttpCompletionOption.ResponseHeadersRead)
                .WaitAsync(s_bound);
            using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
            Assert.Equal("data: ready", await ReadEventAsync(reader));
        } // HTTP/2: RST_STREAM(CANCEL); HTTP/1.1: the connection closes.

        await fixture.BackendAborted(id).WaitAsync(s_bound);
    }

    [Theory]
    [MemberData(nameof(Servers))]
    public async Task ThousandStreams_OneClientConnection_EachGetsItsOwnFirstEvent(ServerKind kind)
    {
        const int streams = 1000;
        var proxy = await fixture.ProxyAsync(kind);
        var connections = 0;
        using var handler = new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = false,
            SslOptions = new SslClientAuthenticationOptions
            {
                RemoteCertificateValidationCallback = (_, certificate, _, _) => TestCertificate.IsTestCertificate(certificate),
            },
            ConnectCallback = async (context, cancellationToken) =>
            {
                Interlocked.Increment(ref connections);
                var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
                await socket.ConnectAsync(context.DnsEndPoint, cancellationToken);
                return new NetworkStream(socket, ownsSocket: true);
            },
        };
        using var client = new HttpClient(handler) { BaseAddress = proxy.HttpsAddress, Timeout = s_bound };
        var group = Guid.NewGuid().ToString("N");

        var responses = await Task.WhenAll(Enumerable.Range(0, streams).Select(i =>
            client.SendAsync(Get($"/h2/sse/fan/{group}/{i}", HttpTransport.Http2Tls), HttpCompletionOption.ResponseHeadersRead)));
        try
        {
            var firstEvents = await Task.WhenAll(responses.Select(async r => await ReadEventAsync(new StreamReader(await r.Content.ReadAsStreamAsync()))));

            Assert.Equal(Enumerable.Range(0, streams).Select(i => $"data: {i}"), firstEvents);
            Assert.All(responses, r => Assert.Equal(HttpVersion.Version20, r.Version));
            Assert.Equal(1, connections);
            Assert.Equal(streams, fixture.Fan(group).OpenedCount); // all open at the backend at once: none closed before this
        }
        finally
        {
            foreach (var response in responses)
            {
                response.Dispose();
            }
        }

        // Every client reset reached the backend as a cancelled request.
        await fixture.Fan(group).Drained.WaitAsync(s_bound);
    }

    public static TheoryData<ServerKind> Servers => new(Enum.GetValues<ServerKind>());
}
