using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using Proxy.Transport.Certificates;

namespace Proxy.Transport.Tests;

internal static class TestCertificates
{
    private static readonly Lazy<X509Certificate2> s_server = new(() =>
    {
        using var created = DevelopmentCertificate.Create(DateTimeOffset.UtcNow);
        return X509CertificateLoader.LoadPkcs12(created.Export(X509ContentType.Pfx), password: null);
    });

    public static X509Certificate2 Server => s_server.Value;
}

/// <summary>A clock that only moves when told (enough for certificate expiry checks).</summary>
internal sealed class FixedTimeProvider(DateTimeOffset now) : TimeProvider
{
    public DateTimeOffset Now { get; set; } = now;

    public override DateTimeOffset GetUtcNow() => Now;
}

/// <summary>Counts and sizes the writes that reach it, passing them through.</summary>
internal sealed class CountingStream(Stream inner) : Stream
{
    private readonly List<int> _writes = [];

    public IReadOnlyList<int> Writes
    {
        get
        {
            lock (_writes)
            {
                return [.. _writes];
            }
        }
    }

    public override bool CanRead => inner.CanRead;
    public override bool CanSeek => false;
    public override bool CanWrite => true;
    public override long Length => throw new NotSupportedException();
    public override long Position { get => throw new NotSupportedException(); set => throw new NotSupportedException(); }

    public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
    {
        lock (_writes)
        {
            _writes.Add(buffer.Length);
        }
        return inner.WriteAsync(buffer, cancellationToken);
    }

    public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        => WriteAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

    public override void Write(byte[] buffer, int offset, int count)
    {
        lock (_writes)
        {
            _writes.Add(count);
        }
        inner.Write(buffer, offset, count);
    }

    public override Task FlushAsync(CancellationToken cancellationToken) => inner.FlushAsync(cancellationToken);
    public override void Flush() => inner.Flush();
    public override int Read(byte[] buffer, int offset, int count) => inner.Read(buffer, offset, count);
    public override ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default) => inner.ReadAsync(buffer, cancellationToken);
    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();
    public override void SetLength(long value) => throw new NotSupportedException();
}

internal static class Net
{
    public static async Task<Socket> ConnectAsync(EndPoint endPoint)
    {
        var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        await socket.ConnectAsync(endPoint);
        return socket;
    }

    public static async Task<byte[]> ReadExactlyAsync(Stream stream, int count)
    {
        var buffer = new byte[count];
        await stream.ReadExactlyAsync(buffer);
        return buffer;
    }

    /// <summary>A test guard against hangs, not a timing assertion.</summary>
    public static readonly TimeSpan Patience = TimeSpan.FromSeconds(30);
}
