using Grpc.Core;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc.Interop;

/// <summary>The interop cases against Grpc.AspNetCore on each server directly, plus many calls on one channel.</summary>
public sealed class InteropServerTests(InteropHostFixture fixture) : InteropCases, IClassFixture<InteropHostFixture>
{
    protected override Task<TestHost> TargetAsync(ServerKind kind) => fixture.GetAsync(kind);

    protected override InteropService Service => fixture.Service;

    public static TheoryData<ServerKind, bool> ServersAndMultipleConnections => new()
    {
        { ServerKind.Kestrel, false }, { ServerKind.Kestrel, true }, { ServerKind.ProxyServer, false }, { ServerKind.ProxyServer, true },
    };

    [Theory]
    [MemberData(nameof(ServersAndMultipleConnections))]
    public async Task ConcurrentCalls_200OnOneChannel_AllSucceed(ServerKind kind, bool multipleConnections)
    {
        // Every call is held in the handler until `releaseAt` calls are in it together. With one connection the server's
        // 100-stream limit (SETTINGS_MAX_CONCURRENT_STREAMS) caps that at 100 and the client queues the other 100; with
        // several connections all 200 can be in at once. Either way no call fails.
        const int calls = 200;
        var releaseAt = multipleConnections ? calls : 100;
        var group = Guid.NewGuid().ToString("N");
        using var channel = await ChannelAsync(kind, HttpTransport.Http2Tls,
            configure: handler => handler.EnableMultipleHttp2Connections = multipleConnections);
        var client = new Interop.InteropClient(channel);

        var replies = await Task.WhenAll(Enumerable.Range(0, calls).Select(_ =>
            client.HoldAsync(new HoldRequest { Group = group, ReleaseAt = releaseAt }, deadline: DateTime.UtcNow + Bound).ResponseAsync));

        Assert.Equal(calls, replies.Length);
        // releaseAt calls were in the handler together (the gate opened), and never more (the stream limit held).
        Assert.Equal(releaseAt, replies.Max(r => r.InFlight));
    }
}

/// <summary>
/// The interop cases through the proxy (h2c and TLS in front, h2c behind): hosted on our server, through the native
/// relay; hosted on Kestrel, through HttpClient. Plus many calls of every shape at once through the relay.
/// </summary>
public sealed class InteropProxyTests(InteropProxyFixture fixture) : InteropProxyCases(fixture), IClassFixture<InteropProxyFixture>;

/// <summary>
/// The same cases with the direct path on our server: every call goes from the server's exchange to the relay with no
/// HttpContext, and must behave exactly as through the pipeline (deadlines, cancellation, trailers-only errors, all four
/// call shapes, a thousand at once).
/// </summary>
public sealed class InteropDirectProxyTests(InteropDirectProxyFixture fixture) : InteropProxyCases(fixture), IClassFixture<InteropDirectProxyFixture>
{
    [Fact]
    public async Task Calls_OnOurServer_SkipThePipeline()
    {
        using var channel = await ChannelAsync(ServerKind.ProxyServer, HttpTransport.Http2Tls);
        var client = new Interop.InteropClient(channel);
        var before = fixture.PipelineRequests;

        await client.EmptyAsync(new Nothing());
        var echo = await client.UnaryAsync(new UnaryRequest { Payload = Payloads.Create(100), ReplySize = 10 });

        Assert.True(Payloads.IsExpected(echo.Payload, 10));
        Assert.Equal(before, fixture.PipelineRequests);
    }
}

/// <summary>The interop cases through a proxy fixture, and many calls of every shape at once through the relay.</summary>
public abstract class InteropProxyCases(InteropProxyFixture fixture) : InteropCases
{
    protected override Task<TestHost> TargetAsync(ServerKind kind) => fixture.ProxyAsync(kind);

    protected override InteropService Service => fixture.Service;

    [Fact]
    public async Task ConcurrentCalls_1000OfFourShapesThroughRelay_AllSucceedWithTheirOwnPayloads()
    {
        // Issue 9: a thousand calls at once, a quarter of each shape, every one with payloads of its own size, so a
        // reply delivered to the wrong call or cut short fails the check.
        const int calls = 1000;
        using var channel = await ChannelAsync(ServerKind.ProxyServer, HttpTransport.Http2Tls);
        var client = new Interop.InteropClient(channel);

        var results = await Task.WhenAll(Enumerable.Range(0, calls).Select(i => (i % 4) switch
        {
            0 => UnaryAsync(client, i),
            1 => ClientStreamingAsync(client, i),
            2 => ServerStreamingAsync(client, i),
            _ => BidiAsync(client, i),
        }));

        Assert.Equal(calls, results.Length);
        Assert.All(results, r => Assert.True(r.Ok, r.Detail));
    }

    private static CallOptions Options() => new(deadline: DateTime.UtcNow + Bound);

    private static int SizeOf(int call, int part) => 1 + (call * 37 + part * 101) % 4000;

    private static async Task<(bool Ok, string Detail)> UnaryAsync(Interop.InteropClient client, int call)
    {
        var payload = Payloads.Create(SizeOf(call, 0));
        var reply = await client.UnaryAsync(new UnaryRequest { Payload = payload, ReplySize = SizeOf(call, 1) }, Options());
        var ok = reply.RequestSha256.Span.SequenceEqual(System.Security.Cryptography.SHA256.HashData(payload.Span))
            && Payloads.IsExpected(reply.Payload, SizeOf(call, 1));
        return (ok, $"unary call {call}");
    }

    private static async Task<(bool Ok, string Detail)> ClientStreamingAsync(Interop.InteropClient client, int call)
    {
        using var upload = client.Upload(Options());
        for (var part = 0; part < 3; part++)
        {
            await upload.RequestStream.WriteAsync(new Chunk { Index = part, Payload = Payloads.Create(SizeOf(call, part)) });
        }

        await upload.RequestStream.CompleteAsync();
        var summary = await upload.ResponseAsync;
        var expected = Enumerable.Range(0, 3).Sum(part => SizeOf(call, part));
        return (summary.Count == 3 && summary.TotalSize == expected, $"client-streaming call {call}: {summary}");
    }

    private static async Task<(bool Ok, string Detail)> ServerStreamingAsync(Interop.InteropClient client, int call)
    {
        int[] sizes = [SizeOf(call, 0), SizeOf(call, 1), SizeOf(call, 2)];
        using var download = client.Download(new DownloadRequest { ReplySizes = { sizes } }, Options());
        var chunks = await download.ResponseStream.ReadAllAsync().ToListAsync();
        var ok = chunks.Count == 3 && chunks.Select((c, i) => c.Index == i && Payloads.IsExpected(c.Payload, sizes[i])).All(x => x);
        return (ok, $"server-streaming call {call}: {chunks.Count} chunks");
    }

    private static async Task<(bool Ok, string Detail)> BidiAsync(Interop.InteropClient client, int call)
    {
        using var conversation = client.Conversation(Options());
        var ok = true;
        for (var part = 0; part < 3; part++)
        {
            await conversation.RequestStream.WriteAsync(new ConversationRequest { Index = part, ReplySize = SizeOf(call, part) });
            ok &= await conversation.ResponseStream.MoveNext(CancellationToken.None)
                && conversation.ResponseStream.Current.Index == part
                && Payloads.IsExpected(conversation.ResponseStream.Current.Payload, SizeOf(call, part));
        }

        await conversation.RequestStream.CompleteAsync();
        ok &= !await conversation.ResponseStream.MoveNext(CancellationToken.None);
        return (ok, $"bidi call {call}");
    }
}
