using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class TlsDuplexPipeTests
{
    [Fact]
    public async Task Dispose_WhilePeerKeepsSending_InputPumpHasEndedBeforeTheStreamCloses()
    {
        // The peer floods records while we close: SSL_read must not run beside SSL_shutdown and SSL_free (with
        // SSL_MODE_RELEASE_BUFFERS the two corrupted the C heap). DisposeAsync returns only once the pump has ended.
        using var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen();
        for (var round = 0; round < 20; round++)
        {
            using var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            await client.ConnectAsync(listener.LocalEndPoint!);
            using var accepted = await listener.AcceptAsync();
            var serverTls = new SslStream(new NetworkStream(accepted, ownsSocket: false));
            await using var clientTls = new SslStream(new NetworkStream(client, ownsSocket: false), false, (_, _, _, _) => true);
            await Task.WhenAll(
                serverTls.AuthenticateAsServerAsync(new SslServerAuthenticationOptions { ServerCertificate = TestCertificates.Server }),
                clientTls.AuthenticateAsClientAsync(new SslClientAuthenticationOptions { TargetHost = "localhost" })).WaitAsync(Net.Patience);
            OpenSslIdleBuffers.TryApply(serverTls);
            var pipe = new TlsDuplexPipe(serverTls, new TlsServerOptions());

            using var stop = new CancellationTokenSource();
            var flood = Task.Run(async () =>
            {
                var chunk = new byte[1000];
                try
                {
                    while (!stop.IsCancellationRequested)
                    {
                        await clientTls.WriteAsync(chunk, stop.Token);
                    }
                }
                catch (Exception)
                {
                    // The server closed.
                }
            });
            var first = await pipe.Input.ReadAtLeastAsync(1000).AsTask().WaitAsync(Net.Patience);
            pipe.Input.AdvanceTo(first.Buffer.End);

            await pipe.DisposeAsync().AsTask().WaitAsync(Net.Patience);

            Assert.True(pipe.InputPump.IsCompleted);
            stop.Cancel();
            accepted.Close();
            await flood.WaitAsync(Net.Patience);
        }
    }
}
