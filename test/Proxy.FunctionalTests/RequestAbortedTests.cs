using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Proxy.Codecs.Http2;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests;

/// <summary>
/// An upload endpoint that reads its body until the client goes away, then records, in its catch, whether
/// RequestAborted was already cancelled. grpc-dotnet makes exactly that check to tell a cancelled call from a
/// failed one ("Error when executing service method"), so the token must be cancelled before the read faults.
/// </summary>
// Shared by the uploads of one host and the tests that wait on them; the probe table is thread-safe.
public sealed class UploadAppFixture : HostFixture
{
    private readonly ConcurrentDictionary<string, UploadProbe> _probes = new();

    protected override bool Https => false;

    /// <summary>The probe of upload <paramref name="id"/>, created by whichever side asks first.</summary>
    public UploadProbe Probe(string id) => _probes.GetOrAdd(id, _ => new UploadProbe());

    protected override void MapEndpoints(WebApplication app)
    {
        app.MapPost("/upload/{id}", async (HttpContext ctx, string id) =>
        {
            var probe = Probe(id);
            // Taken before any read, as grpc-dotnet's ServerCallContext does: this token must fire too, not only a
            // token fetched after the abort. Nothing here passes it to the reads: the fault must come from the body.
            var tokenAtStart = ctx.RequestAborted;
            var reader = ctx.Request.BodyReader;
            try
            {
                while (true)
                {
                    var result = await reader.ReadAsync();
                    var length = result.Buffer.Length;
                    reader.AdvanceTo(result.Buffer.End);
                    if (length > 0)
                    {
                        probe.BodyStarted.TrySetResult();
                    }
                    if (result.IsCompleted)
                    {
                        probe.Outcome.TrySetResult(new UploadOutcome(Faulted: false, "", false, false));
                        return;
                    }
                }
            }
            catch (Exception ex)
            {
                probe.Outcome.TrySetResult(new UploadOutcome(
                    Faulted: true, ex.GetType().Name, tokenAtStart.IsCancellationRequested, ctx.RequestAborted.IsCancellationRequested));
            }
        });
    }
}

/// <summary>What the test waits on: the app read the first body bytes; the app's read ended (and how).</summary>
public sealed class UploadProbe
{
    public TaskCompletionSource BodyStarted { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public TaskCompletionSource<UploadOutcome> Outcome { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);
}

/// <param name="Faulted">The body read threw (else it completed normally).</param>
/// <param name="Exception">The type of what it threw.</param>
/// <param name="TokenAtStartCancelled">In the catch: the RequestAborted token taken before the first read was cancelled.</param>
/// <param name="RequestAbortedCancelled">In the catch: HttpContext.RequestAborted, read there, was cancelled.</param>
public sealed record UploadOutcome(bool Faulted, string Exception, bool TokenAtStartCancelled, bool RequestAbortedCancelled);

public sealed class RequestAbortedTests(UploadAppFixture fixture) : IClassFixture<UploadAppFixture>
{
    /// <summary>Each case aborts several uploads in a row: the order it checks was a race, lost most of the time.</summary>
    private const int Rounds = 8;

    private static readonly TimeSpan s_hangLimit = TimeSpan.FromSeconds(30); // turns a hang into a failure, never a pass

    // NOTE: our server only. Kestrel (.NET 10) was the baseline here, but it does not promise this order on a stream
    // reset either: on a loaded CI machine (2026-11-28) its body read threw before RequestAborted was cancelled, in
    // round 6 of 10.
    [Theory]
    [InlineData(ServerKind.ProxyServer)]
    public async Task Http2_ClientResetsStreamMidBody_RequestAbortedCancelledWhenReadFaults(ServerKind kind)
    {
        var host = await fixture.GetAsync(kind);
        await using var peer = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, host.H2cAddress.Port));
        await peer.HandshakeAsync();

        for (var round = 0; round < Rounds; round++)
        {
            var streamId = 1 + 2 * round;
            var (id, probe) = NewUpload();
            await StartHttp2UploadAsync(peer, streamId, id);
            await probe.BodyStarted.Task.WaitAsync(s_hangLimit);

            await peer.SendRstStreamAsync(streamId, Http2ErrorCode.Cancel);

            await AssertAbortedBeforeFaultAsync(kind, probe, $"round {round}");
        }
    }

    // NOTE: our server only, as the case above. Kestrel (.NET 10) lost this order on connection close too, on the
    // CI machine (2026-12-02, round 0: its body read threw IOException before RequestAborted was cancelled).
    [Theory]
    [InlineData(ServerKind.ProxyServer)]
    public async Task Http2_ClientClosesConnectionMidBody_RequestAbortedCancelledWhenReadFaults(ServerKind kind)
    {
        var host = await fixture.GetAsync(kind);
        for (var round = 0; round < Rounds; round++)
        {
            var (id, probe) = NewUpload();
            var peer = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, host.H2cAddress.Port));
            try
            {
                await peer.HandshakeAsync();
                await StartHttp2UploadAsync(peer, 1, id);
                await probe.BodyStarted.Task.WaitAsync(s_hangLimit);
            }
            finally
            {
                await peer.DisposeAsync(); // the socket closes with the stream open
            }

            await AssertAbortedBeforeFaultAsync(kind, probe, $"round {round}");
        }
    }

    // NOTE: our server only. Kestrel (.NET 10) does not promise this order on HTTP/1.1: its body read throws
    // BadHttpRequestException (closed) or ConnectionResetException (reset) before RequestAborted is cancelled.
    [Theory]
    [InlineData(ServerKind.ProxyServer, false)]
    [InlineData(ServerKind.ProxyServer, true)]
    public async Task Http11_ClientDropsConnectionMidBody_RequestAbortedCancelledWhenReadFaults(ServerKind kind, bool reset)
    {
        var host = await fixture.GetAsync(kind);
        for (var round = 0; round < Rounds; round++)
        {
            var (id, probe) = NewUpload();
            using (var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true })
            {
                await socket.ConnectAsync(IPAddress.Loopback, host.HttpAddress.Port);
                var head = $"POST /upload/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n";
                await socket.SendAsync(Encoding.ASCII.GetBytes(head));
                await socket.SendAsync(new byte[4096]);
                await probe.BodyStarted.Task.WaitAsync(s_hangLimit);
                if (reset)
                {
                    // Linger 0: the close sends RST instead of FIN, so the server's transport read fails.
                    socket.LingerState = new LingerOption(true, 0);
                }
            }

            await AssertAbortedBeforeFaultAsync(kind, probe, $"round {round}");
        }
    }

    private (string Id, UploadProbe Probe) NewUpload()
    {
        var id = Guid.NewGuid().ToString("N");
        return (id, fixture.Probe(id));
    }

    /// <summary>HEADERS for a POST to the upload endpoint, then one DATA frame of part of the body (no END_STREAM).</summary>
    private static async Task StartHttp2UploadAsync(Http2TestPeer peer, int streamId, string id)
    {
        await peer.SendRequestHeadersAsync(streamId, "POST", $"/upload/{id}", endStream: false,
            ("content-type", "application/octet-stream"), ("content-length", "100000"));
        await peer.SendDataAsync(streamId, new byte[4096], endStream: false);
    }

    private static async Task AssertAbortedBeforeFaultAsync(ServerKind kind, UploadProbe probe, string round)
    {
        var outcome = await probe.Outcome.Task.WaitAsync(s_hangLimit);
        Assert.True(outcome.Faulted, $"{round}: the body read completed instead of faulting");
        Assert.True(outcome.RequestAbortedCancelled, $"{round}: RequestAborted was not cancelled when the body read threw {outcome.Exception}");
        if (kind == ServerKind.ProxyServer)
        {
            // NOTE: our server only. Kestrel hands out an already-cancelled token to a caller that asks after the
            // abort, but cancels the token it handed out before on the thread pool, racing the body's fault.
            Assert.True(outcome.TokenAtStartCancelled, $"{round}: the RequestAborted token taken at the start was not cancelled when the body read threw {outcome.Exception}");
        }
    }
}
