using System.Net.Security;

namespace Proxy.Transport.Tls;

// Owned by the TLS middleware for one connection: the protocol reads Input and writes Output;
// the output pump is the only writer of the SslStream, the protocol's reads its only reader.
/// <summary>Pipes over an authenticated <see cref="SslStream"/>: reads decrypt on demand, writes go through the coalescing pump.</summary>
internal sealed class TlsDuplexPipe : IDuplexPipe, IAsyncDisposable
{
    private readonly SslStream _sslStream;
    private readonly Pipe _output;
    private readonly Task _pump;

    public TlsDuplexPipe(SslStream sslStream, TlsServerOptions options)
    {
        _sslStream = sslStream;
        // 16 KiB matches the largest TLS record: one read decrypts one record without splitting. Zero-byte reads:
        // the reader waits for a record before renting its buffer, and SslStream, asked for zero bytes, waits without
        // its own 16 KiB read buffer, so an idle TLS connection holds neither (32 KiB per connection otherwise).
        Input = PipeReader.Create(sslStream, new StreamPipeReaderOptions(
            bufferSize: 16 * 1024, minimumReadSize: 4 * 1024, leaveOpen: true, useZeroByteReads: true));
        _output = new Pipe(new PipeOptions(
            pool: options.OutputMemoryPool,
            pauseWriterThreshold: options.MaxOutputBufferSize,
            resumeWriterThreshold: options.MaxOutputBufferSize / 2,
            useSynchronizationContext: false));
        var target = options.OutputStreamWrapper?.Invoke(sslStream) ?? sslStream;
        _pump = CoalescingOutputPump.RunAsync(_output.Reader, target, options.MaxCoalescedWriteSize);
    }

    public PipeReader Input { get; }

    public PipeWriter Output => _output.Writer;

    public async ValueTask DisposeAsync()
    {
        // Let the pump write what the protocol left, then close: TLS close_notify, then the transport.
        _output.Writer.Complete();
        await _pump.ConfigureAwait(false);
        Input.Complete();
        try
        {
            await _sslStream.ShutdownAsync().ConfigureAwait(false);
        }
        catch (Exception e) when (e is IOException or InvalidOperationException or ObjectDisposedException or ConnectionResetException or ConnectionAbortedException)
        {
            // The peer is gone; nothing to notify.
        }
        await _sslStream.DisposeAsync().ConfigureAwait(false);
    }
}
