using Proxy.Transport.Buffers;

namespace Proxy.Transport.Sockets;

/// <summary>The engine under a socket connection's receive and send loops.</summary>
public enum SocketEngine
{
    /// <summary>.NET's <see cref="System.Net.Sockets.Socket"/> methods: every receive is tried at once and waits for epoll only when it finds nothing.</summary>
    Runtime,

    /// <summary>
    /// Our own epoll engine (Linux only; elsewhere binding a listener or connecting throws
    /// <see cref="PlatformNotSupportedException"/> naming this option): one thread per core unless
    /// <see cref="SocketTransportOptions.EpollThreads"/> says otherwise, each socket added once,
    /// edge-triggered. A receive that emptied the socket waits for the next event instead of asking again, which saves
    /// a recv per message, and a loop resumes on the epoll thread (as the runtime's engine does with
    /// DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS=1): code that blocks there stalls the other sockets of that thread. TLS handshakes and certificate validation continue there too (a chain that fetches a missing intermediate certificate blocks).
    /// </summary>
    Epoll,
}

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

    /// <summary>Pool of the output pipe's segments.</summary>
    public MemoryPool<byte> OutputMemoryPool { get; set; } = BlockMemoryPool.Default;

    /// <summary>
    /// Pool of the input pipe's segments (receive buffers). NOTE: it was <see cref="ArrayPool{T}.Shared"/>, which turned
    /// about 220 KB of 8 KiB arrays into garbage per MB relayed from an HTTP/1.1 backend (a receive rents on one thread,
    /// the relay returns on another, and the shared pool drops what its per-thread and per-core slots cannot hold). With
    /// <see cref="WaitForDataBeforeAllocatingBuffer"/> an idle connection holds no block, so a pooled 16 KiB block costs
    /// nothing while idle.
    /// </summary>
    public MemoryPool<byte> InputMemoryPool { get; set; } = BlockMemoryPool.InputDefault;

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
    /// instead of waking another thread-pool thread for each: a hop per direction per exchange. On by default (Kestrel's
    /// UnsafePreferInlineScheduling is off by default): our HTTP/2 read loop only parses frames and hands each stream to
    /// the thread pool, the HTTP/1.1 loop runs one request at a time anyway, and on Linux a socket completion already
    /// runs on a thread-pool thread, so inline only skips the second hop. Measured through the relay, 1 connection x
    /// 1 stream: thread-pool work items per request 7 -> 4 (h2c GET), 4 -> 2 (HTTP/1.1 GET). Turn it off for an app
    /// whose request handling blocks its thread before its first await (it would hold that connection's receive loop).
    /// On <see cref="SocketEngine.Epoll"/> a flush made on an epoll thread sends once the thread's batch of socket events
    /// was handled, with the batch's other sends (one wakeup of a peer for many messages); made elsewhere, at once.
    /// </summary>
    public bool InlineScheduling { get; set; } = true;

    /// <summary>
    /// Which engine moves the sockets' bytes: <see cref="SocketEngine.Runtime"/> (.NET's Socket methods, the default)
    /// or <see cref="SocketEngine.Epoll"/> (ours, Linux only; see <see cref="SocketEngine"/>).
    /// </summary>
    public SocketEngine Engine { get; set; } = SocketEngine.Runtime;

    /// <summary>
    /// Threads of the <see cref="SocketEngine.Epoll"/> engine; 0 (the default) is one per core, as nginx's
    /// <c>worker_processes auto</c> and HAProxy's <c>nbthread</c>. The engine is shared by the whole process (listeners and
    /// backend connections), so every place that sets this must agree. HTTP/1.1 requests run on these threads from their
    /// first byte to their last (HTTP/2 streams run on the thread pool): fewer threads wake less often, and more threads
    /// serve more HTTP/1.1 connections in parallel. Measured on 2 cores shared with the client and the backend, 1 thread
    /// against 2: context switches per request halved, CPU per request -12% (GET h1, one run) and level (GET h1, another
    /// run; GET h2c, POST), gRPC unary 1x70 +21% CPU and -22% RPS (benchmarks/README, "Session 16"). Not a general win,
    /// hence one per core by default. 0 takes the engine as it runs when another listener or connection of the process
    /// started it first; a number must match it (<see cref="InvalidOperationException"/> otherwise). At most
    /// <see cref="MaxEpollThreads"/>.
    /// </summary>
    public int EpollThreads { get; set; }

    /// <summary>The largest <see cref="EpollThreads"/> accepted.</summary>
    public const int MaxEpollThreads = 1024;

    // TODO(listener buckets): SO_REUSEPORT buckets (several listen sockets on one endpoint, one
    // accept loop each) plug in at SocketConnectionListener.Bind; not implemented yet.
}
