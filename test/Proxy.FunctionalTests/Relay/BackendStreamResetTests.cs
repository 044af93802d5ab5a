using System.Net;
using System.Text;
using Proxy.Codecs.Http2;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// A backend that resets one stream in the middle of its body while another stream of the same connection goes on: the
/// relay turns the reset into a reset of that client stream only (the truncated body can never pass for a whole one),
/// and the other stream and the backend connection are untouched.
/// </summary>
public sealed class BackendStreamResetTests
{
    [Fact]
    public async Task RstStreamMidBody_SecondStreamOnSameConnection_ResetStreamFailsWithProtocolErrorOtherCompletes()
    {
        var resetA = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var finishB = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var finished = new TaskCompletionSource<ScriptedBackendConnection>(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var backend = ScriptedHttp2Backend.Start(async connection =>
        {
            var first = await connection.NextRequestAsync();
            var second = await connection.NextRequestAsync();
            var a = first[":path"] == "/reset/a" ? first.StreamId : second.StreamId;
            var b = first[":path"] == "/reset/b" ? first.StreamId : second.StreamId;
            Assert.NotEqual(a, b);

            await connection.SendResponseHeadersAsync(a);
            await connection.SendDataAsync(a, "a-first\n", endStream: false);
            await connection.SendResponseHeadersAsync(b);
            await connection.SendDataAsync(b, "b-first\n", endStream: false);

            await resetA.Task.WaitAsync(connection.Stopping); // the client has read A's first bytes
            await connection.Peer.SendRstStreamAsync(a, Http2ErrorCode.InternalError);

            await finishB.Task.WaitAsync(connection.Stopping); // the client has seen A fail
            await connection.SendDataAsync(b, "b-last\n", endStream: true);
            finished.TrySetResult(connection);
        });
        var outcomes = new ForwardingOutcomes();
        await using var proxy = await RelayProxy.StartAsync(new ReverseProxyKeys().NativeRoute("reset", "h2", backend.Address.ToString(), h2c: true), outcomes);
        using var client = RelayProxy.CreateClient(proxy);

        var sendA = client.GetAsync("/reset/a", HttpCompletionOption.ResponseHeadersRead);
        var sendB = client.GetAsync("/reset/b", HttpCompletionOption.ResponseHeadersRead);
        using var responseA = await sendA.WaitAsync(RelayProxy.Bound);
        using var responseB = await sendB.WaitAsync(RelayProxy.Bound);
        await using var bodyA = await responseA.Content.ReadAsStreamAsync();
        await using var bodyB = await responseB.Content.ReadAsStreamAsync();

        Assert.Equal(HttpStatusCode.OK, responseA.StatusCode);
        Assert.Equal("a-first\n", await ReadExactlyAsync(bodyA, "a-first\n".Length));
        resetA.TrySetResult();
        var broken = await Assert.ThrowsAnyAsync<IOException>(() => bodyA.CopyToAsync(Stream.Null).WaitAsync(RelayProxy.Bound));
        finishB.TrySetResult();

        // RST_STREAM(INTERNAL_ERROR) on A from the proxy: the backend's failure, not the client's cancellation.
        Assert.Equal(0x2, RelayProxy.Http2ErrorCode(broken));
        Assert.Equal(ForwarderError.ResponseBodyDestination, (await outcomes.ForAsync("/reset/a")).Error);
        Assert.Equal(HttpStatusCode.OK, responseB.StatusCode);
        using (var reader = new StreamReader(bodyB, Encoding.UTF8))
        {
            Assert.Equal("b-first\nb-last\n", await reader.ReadToEndAsync().WaitAsync(RelayProxy.Bound));
        }

        Assert.Equal(ForwarderError.None, (await outcomes.ForAsync("/reset/b")).Error);

        // Both streams shared one backend connection (the script read both heads on it), and the relay kept it: no GOAWAY,
        // no close. NOTE: the pool may have opened a spare connection meanwhile (see BackendPool.CanAddConnection), so the
        // count of connections is not asserted here.
        var connection = await finished.Task.WaitAsync(RelayProxy.Bound);
        Assert.False(connection.Closed.IsCompleted, "The relay closed the backend connection.");
        Assert.DoesNotContain(connection.ControlFrames, f => f.Type == Http2FrameType.GoAway);
        Assert.Empty(backend.Faults);
    }

    private static async Task<string> ReadExactlyAsync(Stream stream, int length)
    {
        var buffer = new byte[length];
        await stream.ReadExactlyAsync(buffer).AsTask().WaitAsync(RelayProxy.Bound);
        return Encoding.UTF8.GetString(buffer);
    }
}
