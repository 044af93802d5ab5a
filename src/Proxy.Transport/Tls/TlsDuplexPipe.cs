using System.Net.Security;

namespace Proxy.Transport.Tls;

// Owned by the TLS middleware for one connection: the protocol reads Input and writes Output;
// the output pump is the only writer of the SslStream, the input pump its only reader.
/// <summary>Pipes over an authenticated <see cref="SslStream"/>: the input pump decrypts into Input, writes go through the coalescing pump.</summary>
internal sealed class TlsDuplexPipe : IDuplexPipe, IAsyncDisposable
{
    private readonly SslStream _sslStream;
    private readonly Pipe _output;
    private readonly Task _pump;
    private readonly Task _inputPump;

    /// <summary>The input pump (tests: it has ended once <see cref="DisposeAsync"/> returns).</summary>
    internal Task InputPump => _inputPump;
    // Ends the input pump's wait for the next record at close (see DisposeAsync's NOTE).
    private readonly CancellationTokenSource _stopInput = new();

    // A block per read: SslStream returns at most one record's plaintext (16 KiB) per read, and most records are small.
    private const int InputReadSize = 4 * 1024;

    public TlsDuplexPipe(SslStream sslStream, TlsServerOptions options)
    {
        _sslStream = sslStream;
        // The input pump decrypts into a Pipe whose reader continues on the pump's thread (see TlsInputPump's NOTE).
        // Zero-byte reads: the pump waits for a record before renting a block, and SslStream, asked for zero bytes,
        // waits without its own 16 KiB read buffer, so an idle TLS connection holds neither.
        var input = new Pipe(new PipeOptions(
            pool: options.InputMemoryPool,
            readerScheduler: PipeScheduler.Inline,
            pauseWriterThreshold: options.MaxInputBufferSize,
            resumeWriterThreshold: options.MaxInputBufferSize / 2,
            minimumSegmentSize: InputReadSize,
            useSynchronizationContext: false));
        Input = input.Reader;
        _inputPump = TlsInputPump.RunAsync(sslStream, input.Writer, InputReadSize, _stopInput.Token);
        // NOTE: the output pump runs where the protocol's flush came from: after the epoll thread's batch when a writer loop
        // ran there (no thread-pool thread wakes per flush), else on the thread pool.
        _output = new Pipe(new PipeOptions(
            pool: options.OutputMemoryPool,
            readerScheduler: Sockets.EventLoop.PipeScheduler,
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
        // NOTE: the input pump ends before close_notify and SSL_free: its SSL_read (on the pump's thread) must not run
        // at the same time as SSL_shutdown (on this one). With SSL_MODE_RELEASE_BUFFERS (OpenSslIdleBuffers) each call frees and allocates
        // the connection's record buffers, and the two together corrupted the C heap: h2spec over TLS, whose peer keeps
        // sending while we close, crashed the process in SSL_free ("free(): corrupted unsorted chunks") in about 1 run
        // in 15. Cancelling only ends the pump's wait for the next record; a record being decrypted finishes first.
        _stopInput.Cancel();
        await _inputPump.ConfigureAwait(false);
        try
        {
            await _sslStream.ShutdownAsync().ConfigureAwait(false);
        }
        catch (Exception e) when (e is IOException or InvalidOperationException or ObjectDisposedException or ConnectionResetException or ConnectionAbortedException or NotSupportedException)
        {
            // The peer is gone; nothing to notify.
        }
        await _sslStream.DisposeAsync().ConfigureAwait(false);
        _stopInput.Dispose();
    }
}
