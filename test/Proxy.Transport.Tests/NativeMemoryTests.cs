using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using Microsoft.AspNetCore.Connections;
using Proxy.Transport.Buffers;
using Proxy.Transport.Sockets;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class NativeMemoryTests
{
    // The CI machines and this one run .NET 10 on Linux with glibc and OpenSSL: there both must work, so a runtime
    // update that moves SslStream's handle fails here rather than silently costing 34 KB per TLS connection.
    private static bool LinuxGlibc => OperatingSystem.IsLinux() && File.Exists("/proc/self/maps")
        && File.ReadAllText("/proc/self/maps").Contains("libc.so.6", StringComparison.Ordinal);

    [Fact]
    public async Task ReleaseIdleBuffers_ServerAndClientSslStreams_ModeSetAndBothDirectionsStillCarryLargeRecords()
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        var options = new TlsServerOptions { ServerCertificate = TestCertificates.Server, ReleaseIdleBuffers = true };
        var payload = new byte[200_000];
        Random.Shared.NextBytes(payload);
        var echoed = new TaskCompletionSource<int>();
        ConnectionDelegate app = async context =>
        {
            // Echo everything back: every record is decrypted and encrypted again with released buffers.
            var total = 0;
            while (total < payload.Length)
            {
                var result = await context.Transport.Input.ReadAsync();
                foreach (var segment in result.Buffer)
                {
                    await context.Transport.Output.WriteAsync(segment);
                }
                total += (int)result.Buffer.Length;
                context.Transport.Input.AdvanceTo(result.Buffer.End);
            }
            echoed.SetResult(total);
        };
        var (client, server) = await TlsConnectionMiddlewareTests.ConnectAsync(listener, options, app);
        await using var _ = client;

        if (LinuxGlibc)
        {
            Assert.True(OpenSslIdleBuffers.IsSupported);
            Assert.True(OpenSslIdleBuffers.TryApply(client)); // reads the mode back: the flag is set
        }

        var send = client.WriteAsync(payload).AsTask();
        var received = await Net.ReadExactlyAsync(client, payload.Length).WaitAsync(Net.Patience);
        await send;
        Assert.Equal(payload, received);
        Assert.Equal(payload.Length, await echoed.Task.WaitAsync(Net.Patience));
        client.Close();
        await server.WaitAsync(Net.Patience);
    }

    [Fact]
    public void TryApply_StreamNotAuthenticated_ReturnsFalse()
    {
        using var stream = new SslStream(new MemoryStream());
        Assert.False(OpenSslIdleBuffers.TryApply(stream));
    }

    [Fact]
    public void NativeHeapTrimmer_Glibc_TrimsAndLeasesNest()
    {
        Assert.Equal(LinuxGlibc, NativeHeapTrimmer.IsSupported);
        if (!LinuxGlibc)
        {
            return;
        }
        // Leave free pages in the C heap, then trim: glibc answers 1 when it released memory.
        var blocks = new IntPtr[2000];
        for (var i = 0; i < blocks.Length; i++)
        {
            blocks[i] = System.Runtime.InteropServices.Marshal.AllocHGlobal(64 * 1024 - 64);
        }
        for (var i = 0; i < blocks.Length; i += 2)
        {
            System.Runtime.InteropServices.Marshal.FreeHGlobal(blocks[i]);
        }
        Assert.True(NativeHeapTrimmer.TrimNow());
        for (var i = 1; i < blocks.Length; i += 2)
        {
            System.Runtime.InteropServices.Marshal.FreeHGlobal(blocks[i]);
        }

        using var first = NativeHeapTrimmer.Acquire(TimeSpan.FromHours(1));
        var second = NativeHeapTrimmer.Acquire(TimeSpan.FromHours(1));
        second.Dispose();
        second.Dispose(); // twice is harmless
        Assert.Same(NativeHeapTrimmer.Acquire(TimeSpan.Zero), NativeHeapTrimmer.Acquire(TimeSpan.Zero));
    }
}
