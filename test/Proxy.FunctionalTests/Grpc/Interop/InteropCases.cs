using System.Security.Cryptography;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc.Interop;

/// <summary>
/// The behaviours of gRPC's public interop test cases, called with Grpc.Net.Client against one kind of target (a
/// server directly, or a proxy in front of one). Each derived class says where its calls go; every case runs on
/// each <see cref="ServerKind"/> over h2c and TLS.
/// </summary>
public abstract class InteropCases
{
    /// <summary>Turns a hang into a failure; a working server is far from it.</summary>
    protected static readonly TimeSpan Bound = TimeSpan.FromSeconds(30);

    /// <summary>
    /// The deadline of the deadline case. NOTE: the call must reach the service before it passes (through a proxy too),
    /// or there is no server to observe it: long against a warm loopback call, short for the suite.
    /// </summary>
    private static readonly TimeSpan s_sleepDeadline = TimeSpan.FromSeconds(1);

    public static TheoryData<ServerKind, HttpTransport> Targets =>
        TestClients.AllTransports(HttpTransport.Http2Cleartext, HttpTransport.Http2Tls);

    /// <summary>Where the calls go: the server, or the proxy in front of it.</summary>
    protected abstract Task<TestHost> TargetAsync(ServerKind kind);

    /// <summary>The service that answers, wherever it runs.</summary>
    protected abstract InteropService Service { get; }

    protected async Task<GrpcChannel> ChannelAsync(ServerKind kind, HttpTransport transport, WireRecorder? recorder = null,
        Action<SocketsHttpHandler>? configure = null) =>
        GrpcChannels.Create(await TargetAsync(kind), transport, configure, observer: recorder);

    private static CallOptions Options(Metadata? headers = null, CancellationToken cancellationToken = default) =>
        new(headers, deadline: DateTime.UtcNow + Bound, cancellationToken: cancellationToken);

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task EmptyUnary_EmptyRequest_EmptyReply(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);

        var reply = await new Interop.InteropClient(channel).EmptyAsync(new Nothing(), Options());

        Assert.Equal(0, reply.CalculateSize());
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task LargeUnary_271828BytesIn_314159BytesOut(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        var payload = Payloads.Create(271_828);

        var reply = await new Interop.InteropClient(channel).UnaryAsync(new UnaryRequest { Payload = payload, ReplySize = 314_159 }, Options());

        Assert.Equal(SHA256.HashData(payload.Span), reply.RequestSha256.ToByteArray());
        Assert.True(Payloads.IsExpected(reply.Payload, 314_159), $"reply payload of {reply.Payload.Length} bytes is not the expected one");
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task ClientStreaming_FourChunks_ServerSawEachByte(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        int[] sizes = [27_182, 8, 1_828, 45_904];
        using var expected = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);

        using var call = new Interop.InteropClient(channel).Upload(Options());
        foreach (var size in sizes)
        {
            var payload = Payloads.Create(size);
            expected.AppendData(payload.Span);
            await call.RequestStream.WriteAsync(new Chunk { Payload = payload });
        }

        await call.RequestStream.CompleteAsync();
        var summary = await call.ResponseAsync;

        Assert.Equal(sizes.Length, summary.Count);
        Assert.Equal(sizes.Sum(), summary.TotalSize);
        Assert.Equal(expected.GetHashAndReset(), summary.Sha256.ToByteArray());
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task ServerStreaming_FourSizes_ChunksInOrder(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        int[] sizes = [31_415, 9, 2_653, 58_979];

        using var call = new Interop.InteropClient(channel).Download(new DownloadRequest { ReplySizes = { sizes } }, Options());
        var chunks = await call.ResponseStream.ReadAllAsync().ToListAsync();

        Assert.Equal(Enumerable.Range(0, sizes.Length), chunks.Select(c => c.Index));
        Assert.All(chunks, c => Assert.True(Payloads.IsExpected(c.Payload, sizes[c.Index]), $"chunk {c.Index}: {c.Payload.Length} bytes"));
        Assert.Equal(StatusCode.OK, call.GetStatus().StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task Bidi_PingPong_EachReplyBeforeTheNextRequest(ServerKind kind, HttpTransport transport)
    {
        // The next request is written only after the previous reply arrived: buffering anywhere on the path hangs here.
        using var channel = await ChannelAsync(kind, transport);
        int[] sizes = [31_415, 9, 2_653, 58_979];

        using var call = new Interop.InteropClient(channel).Conversation(Options());
        for (var i = 0; i < sizes.Length; i++)
        {
            await call.RequestStream.WriteAsync(new ConversationRequest { Index = i, ReplySize = sizes[i] });
            Assert.True(await call.ResponseStream.MoveNext(CancellationToken.None), $"no reply to request {i}");
            Assert.Equal(i, call.ResponseStream.Current.Index);
            Assert.True(Payloads.IsExpected(call.ResponseStream.Current.Payload, sizes[i]), $"reply {i}: {call.ResponseStream.Current.Payload.Length} bytes");
        }

        await call.RequestStream.CompleteAsync();

        Assert.False(await call.ResponseStream.MoveNext(CancellationToken.None));
        Assert.Equal(StatusCode.OK, call.GetStatus().StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task EmptyStream_BidiWithoutMessages_OkAndNoReplies(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);

        using var call = new Interop.InteropClient(channel).Conversation(Options());
        await call.RequestStream.CompleteAsync();
        var replies = await call.ResponseStream.ReadAllAsync().ToListAsync();

        Assert.Empty(replies);
        Assert.Equal(StatusCode.OK, call.GetStatus().StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task CancelAfterBegin_ClientStreaming_Cancelled(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        using var cancellation = new CancellationTokenSource();

        using var call = new Interop.InteropClient(channel).Upload(Options(cancellationToken: cancellation.Token));
        await cancellation.CancelAsync();
        var error = await Assert.ThrowsAsync<RpcException>(() => call.ResponseAsync);

        Assert.Equal(StatusCode.Cancelled, error.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task CancelAfterFirstResponse_Bidi_Cancelled(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        using var cancellation = new CancellationTokenSource();

        using var call = new Interop.InteropClient(channel).Conversation(Options(cancellationToken: cancellation.Token));
        await call.RequestStream.WriteAsync(new ConversationRequest { Index = 0, ReplySize = 31_415 });
        Assert.True(await call.ResponseStream.MoveNext(CancellationToken.None));
        await cancellation.CancelAsync();
        var error = await Assert.ThrowsAsync<RpcException>(() => call.ResponseStream.MoveNext(CancellationToken.None));

        Assert.Equal(StatusCode.Cancelled, error.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task CancelAfterFirstResponse_SleepingServer_ServerObservesCancellation(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        using var cancellation = new CancellationTokenSource();
        var callId = Guid.NewGuid().ToString("N");

        // No deadline: only the cancellation can end it (the WaitAsync below bounds the test).
        using var call = new Interop.InteropClient(channel).Sleep(new SleepRequest { CallId = callId, RepliesFirst = 1 },
            cancellationToken: cancellation.Token);
        Assert.True(await call.ResponseStream.MoveNext(CancellationToken.None)); // the handler runs
        await cancellation.CancelAsync();
        var error = await Assert.ThrowsAsync<RpcException>(() => call.ResponseStream.MoveNext(CancellationToken.None));

        Assert.Equal(StatusCode.Cancelled, error.StatusCode);
        var outcome = await Service.SleepEndedAsync(callId).WaitAsync(Bound); // the handler's token was cancelled
        Assert.Null(outcome.TimeLeftAtStart); // by the client's cancellation: the call had no deadline
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task Deadline_SleepingServer_DeadlineExceeded_ServerObservesIt(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        var callId = Guid.NewGuid().ToString("N");

        using var call = new Interop.InteropClient(channel).Sleep(new SleepRequest { CallId = callId },
            deadline: DateTime.UtcNow + s_sleepDeadline);
        var error = await Assert.ThrowsAsync<RpcException>(() => call.ResponseStream.MoveNext(CancellationToken.None));

        Assert.Equal(StatusCode.DeadlineExceeded, error.StatusCode);
        // The server's handler was cancelled (by its own reading of grpc-timeout, or by the client's reset when the
        // client's timer fired first), and the deadline reached it: no longer than the client's, through a proxy too.
        var outcome = await Service.SleepEndedAsync(callId).WaitAsync(Bound);
        Assert.NotNull(outcome.TimeLeftAtStart);
        Assert.True(outcome.TimeLeftAtStart <= s_sleepDeadline, $"the server's deadline was {outcome.TimeLeftAtStart} away");
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task CustomMetadata_UnaryAndBidi_InitialAndTrailingEchoedIncludingBinary(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        var client = new Interop.InteropClient(channel);
        byte[] binary = [0x00, 0xab, 0xab, 0xab, 0xff, 0x0a, 0x0d];
        var headers = new Metadata
        {
            { InteropService.InitialEchoPrefix, "test_initial_metadata_value" },
            { InteropService.InitialEchoPrefix + "-bin", [0xff, 0x00, 0x7f] },
            { InteropService.TrailingEchoPrefix + "-bin", binary },
            { InteropService.TrailingEchoPrefix, "trailing text" },
        };

        using var unary = client.UnaryAsync(new UnaryRequest { ReplySize = 10 }, Options(headers));
        await unary.ResponseAsync;
        AssertEchoed(await unary.ResponseHeadersAsync, unary.GetTrailers());

        using var bidi = client.Conversation(Options(headers));
        await bidi.RequestStream.WriteAsync(new ConversationRequest { Index = 0, ReplySize = 10 });
        await bidi.RequestStream.CompleteAsync();
        Assert.Single(await bidi.ResponseStream.ReadAllAsync().ToListAsync());
        AssertEchoed(await bidi.ResponseHeadersAsync, bidi.GetTrailers());

        void AssertEchoed(Metadata initial, Metadata trailing)
        {
            Assert.Equal("test_initial_metadata_value", initial.GetValue(InteropService.InitialEchoPrefix));
            Assert.Equal([0xff, 0x00, 0x7f], initial.GetValueBytes(InteropService.InitialEchoPrefix + "-bin"));
            Assert.Equal(binary, trailing.GetValueBytes(InteropService.TrailingEchoPrefix + "-bin"));
            Assert.Equal("trailing text", trailing.GetValue(InteropService.TrailingEchoPrefix));
        }
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task Status_CodeAndNonAsciiMessage_ReachTheClientUnchanged(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);
        const string message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n, 100% café";
        var client = new Interop.InteropClient(channel);

        var unary = await Assert.ThrowsAsync<RpcException>(() =>
            client.UnaryAsync(new UnaryRequest { Fail = new StatusToReturn { Code = 2, Message = message } }, Options()).ResponseAsync);
        using var stream = client.Download(new DownloadRequest { ReplySizes = { 5, 6 }, Fail = new StatusToReturn { Code = 9, Message = message } }, Options());
        var chunks = new List<Chunk>();
        var streamed = await Assert.ThrowsAsync<RpcException>(async () =>
        {
            await foreach (var chunk in stream.ResponseStream.ReadAllAsync())
            {
                chunks.Add(chunk);
            }
        });

        Assert.Equal(StatusCode.Unknown, unary.StatusCode); // trailers-only
        Assert.Equal(message, unary.Status.Detail);
        Assert.Equal([0, 1], chunks.Select(c => c.Index)); // replies, then the status in trailers
        Assert.Equal(StatusCode.FailedPrecondition, streamed.StatusCode);
        Assert.Equal(message, streamed.Status.Detail);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task UnimplementedMethod_OfAMappedService_Unimplemented(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);

        var error = await Assert.ThrowsAsync<RpcException>(() =>
            new Interop.InteropClient(channel).NotImplementedAsync(new Nothing(), Options()).ResponseAsync);

        Assert.Equal(StatusCode.Unimplemented, error.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task UnimplementedService_NeverMapped_Unimplemented(ServerKind kind, HttpTransport transport)
    {
        using var channel = await ChannelAsync(kind, transport);

        var error = await Assert.ThrowsAsync<RpcException>(() =>
            new Missing.MissingClient(channel).AnythingAsync(new Nothing(), Options()).ResponseAsync);

        Assert.Equal(StatusCode.Unimplemented, error.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Targets), MemberType = typeof(InteropCases))]
    public async Task Compression_GzipRequestAndReply_CompressedOnTheWireAndIntact(ServerKind kind, HttpTransport transport)
    {
        var recorder = new WireRecorder();
        using var channel = await ChannelAsync(kind, transport, recorder);
        var payload = Payloads.Create(271_828);
        // Grpc.Net.Client's per-call switch: this call's request messages are gzip-compressed.
        var headers = new Metadata { { "grpc-internal-encoding-request", "gzip" } };

        var reply = await new Interop.InteropClient(channel).UnaryAsync(
            new UnaryRequest { Payload = payload, ReplySize = 314_159, CompressReply = true }, Options(headers));

        Assert.Equal("gzip", reply.RequestEncoding); // what the server was told...
        Assert.Equal(SHA256.HashData(payload.Span), reply.RequestSha256.ToByteArray()); // ...and what it decompressed
        Assert.Equal("gzip", recorder.RequestEncoding);
        Assert.InRange(recorder.RequestBytes, 1, payload.Length / 10);
        Assert.Equal("gzip", recorder.ResponseEncoding);
        Assert.InRange(recorder.ResponseBytes, 1, 314_159 / 10);
        Assert.True(Payloads.IsExpected(reply.Payload, 314_159), $"reply payload of {reply.Payload.Length} bytes is not the expected one");
    }
}
