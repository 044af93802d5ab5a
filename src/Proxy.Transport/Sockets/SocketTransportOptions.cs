using Proxy.Transport.Buffers;

namespace Proxy.Transport.Sockets;

/// <summary>Options of the sockets transport.</summary>
public sealed class SocketTransportOptions
{
    /// <summary>Disable Nagle (TCP_NODELAY): the protocol layers already batch, and latency matters for SSE and gRPC.</summary>
    public bool NoDelay { get; set; } = true;

    /// <summary>Listen backlog.</summary>
    public int Backlog { get; set; } = 512;

    /// <summary>Bytes received but not yet read by the protocol before the receive loop stops reading (backpressure).</summary>
    public long MaxReadBufferSize { get; set; } = 1024 * 1024;

    /// <summary>Bytes written by the protocol but not yet sent before its FlushAsync waits (backpressure).</summary>
    public long MaxWriteBufferSize { get; set; } = 1024 * 1024;

    /// <summary>
    /// Pool of the output pipe's segments. NOTE: the input pipe keeps <see cref="ArrayPool{T}.Shared"/>: a pending
    /// receive holds its buffer while the connection is idle, and a smaller buffer suits that better.
    /// </summary>
    public MemoryPool<byte> OutputMemoryPool { get; set; } = BlockMemoryPool.Default;

    /// <summary>Smallest buffer the receive loop asks the pool for.</summary>
    public int MinReceiveBufferSize { get; set; } = 8 * 1024;

    /// <summary>
    /// Waits for data with a zero-byte receive before taking a receive buffer, so an idle connection holds none
    /// (Kestrel's option of the same name, on by default there too). At 20,000 SSE streams over 2,000 connections the
    /// pending receives held 8 KiB each otherwise. Costs one extra receive call per read that finds no data waiting.
    /// </summary>
    public bool WaitForDataBeforeAllocatingBuffer { get; set; } = true;

    /// <summary>
    /// Runs the protocol's read continuation on the receive loop's thread, and the send on the thread that flushed,
    /// instead of waking another thread-pool thread for each (a hop per direction per exchange). Off by default: a
    /// protocol that does heavy work on a read then holds the receive loop. The relay's backend connections turn it
    /// on: their read loops only parse frames and hand bytes on.
    /// </summary>
    public bool InlineScheduling { get; set; }

    // TODO(listener buckets): SO_REUSEPORT buckets (several listen sockets on one endpoint, one
    // accept loop each) plug in at SocketConnectionListener.Bind; not implemented yet.
}
