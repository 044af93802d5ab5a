using System.Text.Json;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>grpc-js (a real gRPC client) against the Grpc.AspNetCore echo service, over h2c and TLS.</summary>
public sealed class GrpcJsInteropTests(GrpcAppFixture fixture) : IClassFixture<GrpcAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Cleartext, HttpTransport.Http2Tls);

    private static readonly TimeSpan s_serverObservationTimeout = TimeSpan.FromSeconds(10);

    private async Task<JsonElement> RunAsync(ServerKind kind, HttpTransport transport, string scenario, string? callId = null) =>
        await GrpcJsClient.RunAsync(await fixture.GetAsync(kind), transport, scenario, callId);

    private static int Code(JsonElement result) => result.GetProperty("code").GetInt32();

    private static string Describe(JsonElement result) => result.GetRawText();

    private static List<(string Message, int Sequence)> Replies(JsonElement result) =>
        result.GetProperty("replies").EnumerateArray()
            .Select(r => (r.GetProperty("message").GetString()!, r.GetProperty("sequence").GetInt32()))
            .ToList();

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Unary_100KBPayload_EchoedWithOkStatus(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "unary");

        Assert.True(Code(result) == 0, Describe(result));
        var reply = result.GetProperty("reply");
        Assert.Equal("echo: hello", reply.GetProperty("message").GetString());
        Assert.Equal(7, reply.GetProperty("sequence").GetInt32());
        Assert.Equal(result.GetProperty("payloadSent").GetString(), result.GetProperty("payloadReceived").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task ServerStreaming_FiveReplies_InOrderThenOk(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "server-stream");

        Assert.True(Code(result) == 0, Describe(result));
        Assert.Equal(Enumerable.Range(0, 5).Select(i => ($"tick {i}", i)), Replies(result));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task ClientStreaming_FiveRequests_OneAggregatedReply(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "client-stream");

        Assert.True(Code(result) == 0, Describe(result));
        var reply = result.GetProperty("reply");
        Assert.Equal("m0,m1,m2,m3,m4", reply.GetProperty("message").GetString());
        Assert.Equal(5, reply.GetProperty("count").GetInt32());
        Assert.Equal(5000, reply.GetProperty("sequence").GetInt32()); // payload bytes the server received
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Bidi_PingPong_EachReplyArrivesBeforeTheNextRequest(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "bidi");

        Assert.True(Code(result) == 0, Describe(result));
        Assert.Equal(Enumerable.Range(0, 5).Select(i => ($"echo: ping {i}", i)), Replies(result));
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task BidiHeadersFirst_ClientSeesMetadataBeforeSending(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "bidi-headers-first");

        Assert.True(Code(result) == 0, Describe(result));
        Assert.True(result.GetProperty("metadataBeforeFirstWrite").GetBoolean(), Describe(result));
        Assert.Equal("yes", result.GetProperty("serverReady").GetString());
        Assert.Equal(Enumerable.Range(0, 3).Select(i => ($"echo: after headers {i}", i)), Replies(result));
        Assert.Equal("3", result.GetProperty("trailers").GetProperty("x-messages-seen").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Deadline_300ms_DeadlineExceeded_ServerCallCancelled(ServerKind kind, HttpTransport transport)
    {
        var callId = Guid.NewGuid().ToString("N");
        var result = await RunAsync(kind, transport, "deadline", callId);

        Assert.True(Code(result) == 4, Describe(result)); // DEADLINE_EXCEEDED
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(s_serverObservationTimeout);
        // The server parsed grpc-timeout into a deadline of at most the client's 300 ms...
        Assert.NotNull(outcome.TimeoutFromHeader);
        Assert.InRange(outcome.TimeoutFromHeader!.Value, TimeSpan.Zero, TimeSpan.FromMilliseconds(300));
        // ...and the handler was cancelled, by its own deadline or by the client's reset when its timer fired first.
        Assert.Contains(outcome.EndedBy, new[] { "deadline", "client-cancelled" });
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Cancel_AfterFirstReply_ServerObservesClientCancellation(ServerKind kind, HttpTransport transport)
    {
        var callId = Guid.NewGuid().ToString("N");
        var result = await RunAsync(kind, transport, "cancel", callId);

        Assert.True(Code(result) == 1, Describe(result)); // CANCELLED
        Assert.Single(Replies(result));
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(s_serverObservationTimeout);
        Assert.Equal("client-cancelled", outcome.EndedBy);
        Assert.Null(outcome.TimeoutFromHeader);
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Error_TrailersOnly_StatusAndPercentEncodedMessageReachClient(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "error");

        Assert.True(Code(result) == 5, Describe(result)); // NOT_FOUND
        Assert.Equal("no such thing: caf\u00e9 100%", result.GetProperty("details").GetString());
    }

    [GrpcJsTheory]
    [MemberData(nameof(Transports))]
    public async Task Error_AfterTwoReplies_RepliesThenStatusInTrailers(ServerKind kind, HttpTransport transport)
    {
        var result = await RunAsync(kind, transport, "error-after-replies");

        Assert.True(Code(result) == 9, Describe(result)); // FAILED_PRECONDITION
        Assert.Equal("stopped after 2", result.GetProperty("details").GetString());
        Assert.Equal([("tick 0", 0), ("tick 1", 1)], Replies(result));
    }
}
