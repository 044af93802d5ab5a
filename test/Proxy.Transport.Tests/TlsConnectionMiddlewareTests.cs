using System.Buffers;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Text;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features;
using Proxy.Transport.InMemory;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class TlsConnectionMiddlewareTests
{
    private sealed record Negotiated(string Alpn, SslProtocols Protocol, TlsCipherSuite? Cipher, string HostName);

    /// <summary>Runs one TLS connection over a loopback socket; the server side runs <paramref name="app"/> after the handshake.</summary>
    internal static async Task<(SslStream Client, Task Server)> ConnectAsync(
        SocketConnectionListener listener, TlsServerOptions options, ConnectionDelegate app, params SslApplicationProtocol[] clientAlpn)
    {
        var middleware = new TlsConnectionMiddleware(app, options);
        var socket = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var server = Task.Run(async () =>
        {
            await using (connection)
            {
                await middleware.OnConnectionAsync(connection);
            }
        });
        var client = new SslStream(new NetworkStream(socket, ownsSocket: true));
        await client.AuthenticateAsClientAsync(new SslClientAuthenticationOptions
        {
            TargetHost = "localhost",
            ApplicationProtocols = [.. clientAlpn],
            RemoteCertificateValidationCallback = (_, _, _, _) => true, // Self-signed test certificate.
        }).WaitAsync(Net.Patience);
        return (client, server);
    }

    private static readonly AsyncLocal<bool> s_inWakeTest = new();

    [Fact]
    public async Task Input_CancelPendingRead_WakesTheReaderWithoutAnExceptionAndBytesStillFlow()
    {
        // The HTTP/2 read loop is woken with CancelPendingRead for every stream's end; over TLS each wake used to throw
        // OperationCanceledExceptions through SslStream's async layers (a StreamPipeReader cancels the stream read).
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server };
        var thrown = 0;
        EventHandler<System.Runtime.ExceptionServices.FirstChanceExceptionEventArgs> count = (_, e) =>
        {
            if (s_inWakeTest.Value && e.Exception is OperationCanceledException)
            {
                Interlocked.Increment(ref thrown);
            }
        };
        var woken = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
        ConnectionDelegate app = async context =>
        {
            s_inWakeTest.Value = true;
            var input = context.Transport.Input;
            var canceled = 0;
            for (var i = 0; i < 50; i++)
            {
                var pending = input.ReadAsync();
                input.CancelPendingRead();
                var result = await pending;
                canceled += result.IsCanceled ? 1 : 0;
                input.AdvanceTo(result.Buffer.Start, result.Buffer.End);
            }
            woken.SetResult(canceled);

            // Still a working transport after the wakes.
            var read = await input.ReadAtLeastAsync(4);
            var bytes = read.Buffer.Slice(0, 4).ToArray();
            input.AdvanceTo(read.Buffer.GetPosition(4));
            await context.Transport.Output.WriteAsync(bytes);
        };

        AppDomain.CurrentDomain.FirstChanceException += count;
        try
        {
            var (client, server) = await ConnectAsync(listener, options, app, new SslApplicationProtocol("h2"));
            await using (client)
            {
                Assert.Equal(50, await woken.Task.WaitAsync(Net.Patience));
                await client.WriteAsync("wxyz"u8.ToArray());
                Assert.Equal("wxyz", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(client, 4).WaitAsync(Net.Patience)));
            }
            await server.WaitAsync(Net.Patience);
        }
        finally
        {
            AppDomain.CurrentDomain.FirstChanceException -= count;
        }

        Assert.Equal(0, Volatile.Read(ref thrown));
    }

    [Theory]
    [InlineData("h2")]
    [InlineData("http/1.1")]
    public async Task Handshake_ClientOffersAlpn_ServerFeaturesReportIt(string protocol)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server };
        var negotiated = new TaskCompletionSource<Negotiated>();
        ConnectionDelegate app = async context =>
        {
            var handshake = context.Features.Get<ITlsHandshakeFeature>()!;
            var alpn = context.Features.Get<ITlsApplicationProtocolFeature>()!;
            negotiated.SetResult(new(Encoding.ASCII.GetString(alpn.ApplicationProtocol.Span), handshake.Protocol,
                handshake.NegotiatedCipherSuite, handshake.HostName));
            // Echo one line over the decrypted transport to prove the swap.
            var result = await context.Transport.Input.ReadAtLeastAsync(4);
            var bytes = result.Buffer.Slice(0, 4).ToArray();
            context.Transport.Input.AdvanceTo(result.Buffer.GetPosition(4));
            await context.Transport.Output.WriteAsync(bytes);
        };

        var (client, server) = await ConnectAsync(listener, options, app, new SslApplicationProtocol(protocol));
        await using (client)
        {
            Assert.Equal(protocol, client.NegotiatedApplicationProtocol.ToString());
            await client.WriteAsync("abcd"u8.ToArray());
            Assert.Equal("abcd", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(client, 4).WaitAsync(Net.Patience)));

            var seen = await negotiated.Task.WaitAsync(Net.Patience);
            Assert.Equal(protocol, seen.Alpn);
            Assert.True(seen.Protocol is SslProtocols.Tls12 or SslProtocols.Tls13);
            Assert.NotNull(seen.Cipher);
            Assert.Equal("localhost", seen.HostName);
        }
        await server.WaitAsync(Net.Patience);
    }

    [Fact]
    public async Task Handshake_ServerOffersOnlyHttp11_ClientAskingH2AndHttp11GetsHttp11()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, ApplicationProtocols = [SslApplicationProtocol.Http11] };
        var (client, server) = await ConnectAsync(listener, options, _ => Task.CompletedTask,
            SslApplicationProtocol.Http2, SslApplicationProtocol.Http11);
        await using (client)
        {
            Assert.Equal(SslApplicationProtocol.Http11, client.NegotiatedApplicationProtocol);
        }
        await server.WaitAsync(Net.Patience);
    }

    [Fact]
    public async Task Write_OneMegabyteInFourKiBPieces_ReachesSslStreamInFewLargeWrites()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        CountingStream? counting = null;
        var options = new TlsServerOptions
        {
            ServerCertificate = TestCertificates.Server,
            OutputStreamWrapper = ssl => counting = new CountingStream(ssl),
        };
        const int total = 1024 * 1024;
        ConnectionDelegate app = async context =>
        {
            // The way Kestrel-style writers produce output: many 4 KiB segments, then one flush.
            var output = context.Transport.Output;
            for (var written = 0; written < total; written += 4096)
            {
                var span = output.GetSpan(4096)[..4096];
                span.Fill((byte)(written / 4096));
                output.Advance(4096);
            }
            await output.FlushAsync();
        };

        var (client, server) = await ConnectAsync(listener, options, app, SslApplicationProtocol.Http2);
        await using (client)
        {
            var received = await Net.ReadExactlyAsync(client, total).WaitAsync(Net.Patience);
            Assert.Equal(0, received[0]);
            Assert.Equal(255, received[^1]);
        }
        await server.WaitAsync(Net.Patience);

        var writes = counting!.Writes;
        Assert.Equal(total, writes.Sum());
        Assert.All(writes, size => Assert.True(size > 4096, $"write of {size} bytes"));
        Assert.True(writes.Count <= 16, $"{writes.Count} writes");
    }

    [Fact]
    public async Task Handshake_ClientSilent_TimesOutWithoutCallingNext()
    {
        await using var listener = new InMemoryConnectionListener();
        var client = await listener.ConnectAsync();
        var connection = (await listener.AcceptAsync())!;
        var called = false;
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, HandshakeTimeout = TimeSpan.FromMilliseconds(50) };
        var middleware = new TlsConnectionMiddleware(_ => { called = true; return Task.CompletedTask; }, options);

        await middleware.OnConnectionAsync(connection).WaitAsync(Net.Patience);

        Assert.False(called);
        // The server closed its side: the client reads end of stream.
        var result = await client.Transport.Input.ReadAsync().AsTask().WaitAsync(Net.Patience);
        Assert.True(result.IsCompleted);
    }

    [Fact]
    public async Task Handshake_ClientSpeaksPlainHttp_FailsWithoutCallingNext()
    {
        await using var listener = new InMemoryConnectionListener();
        var client = await listener.ConnectAsync();
        var connection = (await listener.AcceptAsync())!;
        var called = false;
        var middleware = new TlsConnectionMiddleware(_ => { called = true; return Task.CompletedTask; },
            new TlsServerOptions { ServerCertificate = TestCertificates.Server });

        await client.Transport.Output.WriteAsync("GET / HTTP/1.1\r\nHost: x\r\n\r\n"u8.ToArray());
        await middleware.OnConnectionAsync(connection).WaitAsync(Net.Patience);

        Assert.False(called);
    }
}
