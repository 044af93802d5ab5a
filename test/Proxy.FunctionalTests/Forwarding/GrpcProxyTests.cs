using System.Text.Json;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Demo.Grpc;
using Proxy.Demo.Grpc.Echo;
using EchoClient = Proxy.Demo.Grpc.Echo.Echo.EchoClient;
using Proxy.FunctionalTests.Grpc;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// The echo gRPC service on Kestrel (h2c) behind the proxy; grpc-js talks h2 over TLS to the proxy.
/// Routes: every Echo method to the backend; with <c>x-target: dead</c> to an address nobody listens on;
/// with <c>x-target: slow</c> through a route whose Timeout is 300 ms.
/// </summary>
// Shared by the calls of one class; see EchoService for its state.
public sealed class GrpcProxyFixture : ProxyFixture
{
    /// <summary>A request header that makes the backend send one reply and then abort the call.</summary>
    public const string AbortHeader = "x-test-abort";

    public EchoService Echo { get; } = new();

    protected override void ConfigureBackendServices(IServiceCollection services) => services.AddEchoService(Echo);

    protected override void MapBackend(WebApplication app)
    {
        app.Use(async (context, next) =>
        {
            if (!context.Request.Headers.ContainsKey(AbortHeader))
            {
                await next(context);
                return;
            }

            // Breaks the call after one message, the way a crashing backend does (Kestrel: RST_STREAM INTERNAL_ERROR).
            // The request is read first: a reset racing the proxy's request body would be reported before the
            // response headers (UNAVAILABLE), which is another test.
            await context.Request.Body.CopyToAsync(Stream.Null);
            context.Response.ContentType = RawGrpcFrames.ContentType;
            await context.Response.Body.WriteAsync(RawGrpcFrames.Frame(new EchoReply { Message = "before abort" }));
            await context.Response.Body.FlushAsync();
            context.Abort();
        });
        app.MapEchoService();
    }

    protected override async Task WarmUpAsync(TestHost proxy)
    {
        using var channel = GrpcChannels.Create(proxy, HttpTransport.Http2Tls);
        var reply = await new EchoClient(channel).UnaryAsync(new EchoRequest { Message = "warm-up" });
        if (reply.Message != "echo: warm-up")
        {
            throw new InvalidOperationException($"The warm-up call through the {proxy.Kind} proxy got '{reply.Message}'.");
        }
    }

    protected override void Configure(ReverseProxyKeys config, TestHost backend)
    {
        var methods = $"/{EchoService.ServiceName}/{{method}}";
        config.Route("grpc", "echo", methods).Destination("echo", backend.H2cAddress.ToString()).H2c("echo");
        config.Route("grpc-dead", "dead", methods).RouteHeader("grpc-dead", "x-target", "dead")
            .Destination("dead", ReverseProxyKeys.DeadAddress()).H2c("dead");
        config.Route("grpc-slow", "echo", methods).RouteHeader("grpc-slow", "x-target", "slow").RouteSet("grpc-slow", "Timeout", "00:00:00.300");
    }
}

/// <summary>grpc-js through the proxy (h2 TLS in front, h2c behind), proxy hosted on Kestrel and on our server.</summary>
public sealed class GrpcProxyTests(GrpcProxyFixture fixture) : IClassFixture<GrpcProxyFixture>
{
    public static TheoryData<ServerKind> Servers => new(Enum.GetValues<ServerKind>());

    private static readonly TimeSpan s_backendObservationTimeout = TimeSpan.FromSeconds(10);

    private async Task<JsonElement> RunAsync(ServerKind kind, string scenario, string? callId = null,
        IReadOnlyDictionary<string, string>? metadata = null, int? deadlineMilliseconds = null) =>
        await GrpcJsClient.RunAsync(await fixture.ProxyAsync(kind), HttpTransport.Http2Tls, scenario, callId, metadata, deadlineMilliseconds);

    private static int Code(JsonElement result) => result.GetProperty("code").GetInt32();

    private static List<(string Message, int Sequence)> Replies(JsonElement result) =>
        result.GetProperty("replies").EnumerateArray()
            .Select(r => (r.GetProperty("message").GetString()!, r.GetProperty("sequence").GetInt32()))
            .ToList();

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Unary_ThroughProxy_100KBPayloadEchoed(ServerKind kind)
    {
        var result = await RunAsync(kind, "unary");

        Assert.True(Code(result) == 0, result.GetRawText());
        Assert.Equal("echo: hello", result.GetProperty("reply").GetProperty("message").GetString());
        Assert.Equal(result.GetProperty("payloadSent").GetString(), result.GetProperty("payloadReceived").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task ServerStreaming_ThroughProxy_FiveRepliesInOrderThenOk(ServerKind kind)
    {
        var result = await RunAsync(kind, "server-stream");

        Assert.True(Code(result) == 0, result.GetRawText());
        Assert.Equal(Enumerable.Range(0, 5).Select(i => ($"tick {i}", i)), Replies(result));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task ClientStreaming_ThroughProxy_OneAggregatedReply(ServerKind kind)
    {
        var result = await RunAsync(kind, "client-stream");

        Assert.True(Code(result) == 0, result.GetRawText());
        var reply = result.GetProperty("reply");
        Assert.Equal("m0,m1,m2,m3,m4", reply.GetProperty("message").GetString());
        Assert.Equal(5000, reply.GetProperty("sequence").GetInt32()); // payload bytes the backend received
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Bidi_PingPongThroughProxy_EachReplyArrivesBeforeTheNextRequest(ServerKind kind)
    {
        // The client writes message i+1 only after reply i arrived: a proxy that buffers either way hangs here.
        var result = await RunAsync(kind, "bidi");

        Assert.True(Code(result) == 0, result.GetRawText());
        Assert.Equal(Enumerable.Range(0, 5).Select(i => ($"echo: ping {i}", i)), Replies(result));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task BidiHeadersFirst_ThroughProxy_ClientSeesMetadataBeforeSending(ServerKind kind)
    {
        // YARP #2520: the backend sends headers and waits for a message; the client sends only after the headers.
        var result = await RunAsync(kind, "bidi-headers-first");

        Assert.True(Code(result) == 0, result.GetRawText());
        Assert.True(result.GetProperty("metadataBeforeFirstWrite").GetBoolean(), result.GetRawText());
        Assert.Equal("yes", result.GetProperty("serverReady").GetString());
        Assert.Equal("3", result.GetProperty("trailers").GetProperty("x-messages-seen").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Deadline_1s_DeadlineExceeded_BackendSawGrpcTimeout(ServerKind kind)
    {
        // NOTE: 1 s, not 300 ms: the call crosses two hops and must reach the backend before its deadline passes,
        // or the backend never runs the handler that records what it saw.
        var callId = Guid.NewGuid().ToString("N");

        var result = await RunAsync(kind, "deadline", callId, deadlineMilliseconds: 1000);

        Assert.True(Code(result) == 4, result.GetRawText()); // DEADLINE_EXCEEDED
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(s_backendObservationTimeout);
        Assert.NotNull(outcome.TimeoutFromHeader); // grpc-timeout was forwarded...
        Assert.InRange(outcome.TimeoutFromHeader!.Value, TimeSpan.Zero, TimeSpan.FromMilliseconds(1000)); // ...not lengthened
        Assert.Contains(outcome.EndedBy, new[] { "deadline", "client-cancelled" });
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Cancel_ClientCancelsAfterFirstReply_BackendObservesCancellation(ServerKind kind)
    {
        var callId = Guid.NewGuid().ToString("N");

        var result = await RunAsync(kind, "cancel", callId);

        Assert.True(Code(result) == 1, result.GetRawText()); // CANCELLED
        Assert.Single(Replies(result));
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(s_backendObservationTimeout);
        Assert.Equal("client-cancelled", outcome.EndedBy);
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task BackendAborts_AfterOneReply_ClientGetsInternalStatus(ServerKind kind)
    {
        var result = await RunAsync(kind, "wait", metadata: new Dictionary<string, string> { [GrpcProxyFixture.AbortHeader] = "1" });

        // The proxy resets the client stream with INTERNAL_ERROR (the backend broke it), which grpc-js reports as INTERNAL.
        Assert.True(Code(result) == 13, result.GetRawText());
        // NOTE: not Single: the reply and the reset can reach a client in one read, and neither HttpClient (in the proxy)
        // nor grpc-js promises to surface data that arrived together with a reset.
        Assert.All(Replies(result), r => Assert.Equal("before abort", r.Message));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Error_TrailersOnlyFromBackend_StatusAndMessageUnchanged(ServerKind kind)
    {
        var result = await RunAsync(kind, "error");

        Assert.True(Code(result) == 5, result.GetRawText()); // NOT_FOUND
        Assert.Equal("no such thing: caf\u00e9 100%", result.GetProperty("details").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task Error_AfterTwoReplies_RepliesThenStatusInTrailers(ServerKind kind)
    {
        var result = await RunAsync(kind, "error-after-replies");

        Assert.True(Code(result) == 9, result.GetRawText()); // FAILED_PRECONDITION
        Assert.Equal("stopped after 2", result.GetProperty("details").GetString());
        Assert.Equal([("tick 0", 0), ("tick 1", 1)], Replies(result));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task BackendDown_Unary_UnavailableTrailersOnly(ServerKind kind)
    {
        var result = await RunAsync(kind, "unary", metadata: new Dictionary<string, string> { ["x-target"] = "dead" });

        Assert.True(Code(result) == 14, result.GetRawText()); // UNAVAILABLE
        Assert.Equal("The backend is unavailable.", result.GetProperty("details").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Servers))]
    public async Task BackendSlowPastRouteTimeout_DeadlineExceeded_BackendCancelled(ServerKind kind)
    {
        var callId = Guid.NewGuid().ToString("N");

        var result = await RunAsync(kind, "wait", callId, new Dictionary<string, string> { ["x-target"] = "slow" });

        Assert.True(Code(result) == 4, result.GetRawText()); // DEADLINE_EXCEEDED, from the proxy's route timeout
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(s_backendObservationTimeout);
        Assert.Null(outcome.TimeoutFromHeader); // the client set no deadline: only the proxy ended it
        Assert.Equal("client-cancelled", outcome.EndedBy);
    }
}
