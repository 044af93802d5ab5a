namespace Proxy.Protocols.Http2;

/// <summary>
/// HTTP/2 limits and windows. Defaults follow Kestrel and the anchors (shared/design/ANCHORS.md)
/// unless a comment says why not.
/// </summary>
public sealed class Http2Options
{
    /// <summary>SETTINGS_MAX_CONCURRENT_STREAMS we advertise; beyond it streams get REFUSED_STREAM.</summary>
    public int MaxConcurrentStreams { get; set; } = 100;
    /// <summary>SETTINGS_HEADER_TABLE_SIZE we advertise (decoder dynamic table).</summary>
    public int HeaderTableSize { get; set; } = 4096;
    /// <summary>Largest encoder dynamic table we use even if the peer allows more.</summary>
    public int MaxEncoderHeaderTableSize { get; set; } = 4096;
    /// <summary>SETTINGS_MAX_FRAME_SIZE we advertise (largest frame we accept).</summary>
    public int MaxFrameSize { get; set; } = 16 * 1024;
    /// <summary>SETTINGS_MAX_HEADER_LIST_SIZE: decoded header list size (RFC 9113 §6.5.2 accounting). Over it: 431 / ENHANCE_YOUR_CALM.</summary>
    public int MaxRequestHeaderFieldSize { get; set; } = 32 * 1024;
    /// <summary>Largest decoded header list (names + values + 32 per field).</summary>
    public int MaxHeaderListSize { get; set; } = 32 * 1024;
    /// <summary>Maximum header fields in one request.</summary>
    public int MaxHeaderCount { get; set; } = 100;
    /// <summary>
    /// Accept a request whose ":scheme" differs from the connection's ("https" on TLS, "http" on cleartext) when it is a
    /// valid RFC 3986 scheme; the app then sees that scheme. Off by default (Kestrel's AllowAlternateSchemes): such a
    /// request is a PROTOCOL_ERROR stream error. Turn it on behind a TLS-terminating proxy that forwards ":scheme https"
    /// over h2c (HAProxy, nghttpx).
    /// </summary>
    public bool AllowAlternateSchemes { get; set; }
    /// <summary>Maximum CONTINUATION frames after one HEADERS (nghttp2 allows 8; CVE-2024-27316).</summary>
    public int MaxContinuationFrames { get; set; } = 8;
    /// <summary>Largest encoded header block (HEADERS + CONTINUATION bytes) we buffer before decoding.</summary>
    public int MaxHeaderBlockSize { get; set; } = 64 * 1024;
    /// <summary>Connection-level receive window (Kestrel: 1 MiB).</summary>
    public int InitialConnectionWindowSize { get; set; } = 1024 * 1024;
    /// <summary>Per-stream receive window, SETTINGS_INITIAL_WINDOW_SIZE we advertise (Kestrel: 768 KiB).</summary>
    public int InitialStreamWindowSize { get; set; } = 768 * 1024;
    /// <summary>Queued control frames (PING/SETTINGS ACK, RST_STREAM) awaiting write before the connection is closed with ENHANCE_YOUR_CALM (CVE-2019-9512/9515).</summary>
    public int MaxQueuedControlFrames { get; set; } = 1000;
    /// <summary>Rapid reset guard: resets/refusals counted over <see cref="StreamResetWindow"/>; above the limit GOAWAY ENHANCE_YOUR_CALM (CVE-2023-44487).</summary>
    public int MaxStreamResetsPerWindow { get; set; } = 200;
    public TimeSpan StreamResetWindow { get; set; } = TimeSpan.FromSeconds(5);
    /// <summary>Consecutive empty DATA/CONTINUATION/HEADERS frames tolerated (CVE-2019-9518; Envoy allows 1).</summary>
    public int MaxConsecutiveEmptyFrames { get; set; } = 1;
    /// <summary>Time to receive a complete request header block once started, and the preface/first SETTINGS (slowloris).</summary>
    public TimeSpan RequestHeadersTimeout { get; set; } = TimeSpan.FromSeconds(30);
    /// <summary>Close an idle connection (no open streams) after this long (Kestrel keep-alive timeout: 130 s).</summary>
    public TimeSpan KeepAliveTimeout { get; set; } = TimeSpan.FromSeconds(130);
    /// <summary>Bytes the writer loop gathers before one transport write when frames keep coming (writes happen sooner when the queue drains).</summary>
    public int MaxWriteBatchSize { get; set; } = 64 * 1024;
    /// <summary>Capacity of the writer loop's channel (bounded; a full channel applies backpressure to producers, never grows).</summary>
    public int WriterQueueCapacity { get; set; } = 1024;
    /// <summary>
    /// Slow-read guard (a minimum response data rate): a transport flush that has not completed after this long
    /// (the client stopped reading, or reads slower than about MaxWriteBatchSize per WriteTimeout) aborts the
    /// connection. <see cref="Timeout.InfiniteTimeSpan"/> disables it.
    /// </summary>
    public TimeSpan WriteTimeout { get; set; } = TimeSpan.FromSeconds(30);
    /// <summary>After the final GOAWAY of a graceful shutdown, how long open streams may take to finish before the connection is aborted.</summary>
    public TimeSpan ShutdownDrainTimeout { get; set; } = TimeSpan.FromSeconds(30);
    /// <summary>
    /// A response that completes before its request ended (a gRPC error sent trailers-only, a 4xx for an upload) would
    /// be followed at once by RST_STREAM(NO_ERROR) (RFC 9113 §8.1). The client's END_STREAM is then often already on the
    /// wire, and some clients take a reset that overtakes their own end as a failed call: grpc-js reports
    /// "Received RST_STREAM with code 0" as INTERNAL instead of the status it received (grpc-node #2569). So the
    /// stream waits this long for the client's END_STREAM, dropping what DATA comes (the client can send no more
    /// than the stream window it already has), and is reset only if the request has not ended by then. Not when a
    /// declared content-length cannot fit in that window: the client could not finish anyway, so the reset goes at
    /// once. <see cref="TimeSpan.Zero"/> resets at once always. The waiting stream keeps its concurrency slot.
    /// </summary>
    public TimeSpan RequestEndGracePeriod { get; set; } = TimeSpan.FromSeconds(1);
    /// <summary>Largest response body bytes a stream may have queued for the writer before its FlushAsync waits.</summary>
    public int MaxStreamOutputBufferSize { get; set; } = 64 * 1024;
    /// <summary>
    /// Pool of the streams' request and response pipe segments; null uses <see cref="ArrayPool{T}.Shared"/>. The
    /// server passes a pool that keeps blocks (its output pipes' pool). ArrayPool.Shared missed here both ways:
    /// eight streams of a large download hold 512 KiB, more than it keeps per size; and a request body's segment is
    /// rented on the read loop and returned on the app's thread, so its per-thread caches drain on one side
    /// (measured: a 4 KiB array allocated for every gRPC unary call, two thirds of the bytes the server allocated).
    /// </summary>
    public MemoryPool<byte>? StreamMemoryPool { get; set; }

    /// <summary>
    /// Smallest segment the stream pipes rent (<see cref="PipeOptions.MinimumSegmentSize"/>); the engine writes received
    /// DATA with size hints, so a small payload takes a block of this size, a large one blocks of the pool's
    /// <see cref="MemoryPool{T}.MaxBufferSize"/>. The server and the relay set 256 bytes with a pool of 256-byte, 1, 4 and 16 KiB
    /// blocks (<c>BlockMemoryPool.StreamDefault</c>).
    /// </summary>
    public int StreamMinimumSegmentSize { get; set; } = 4096;

    /// <summary>The former name of <see cref="StreamMemoryPool"/> (it now serves request pipes too).</summary>
    [Obsolete("Use StreamMemoryPool: the pool now serves request and response pipes.")]
    public MemoryPool<byte>? ResponseMemoryPool { get => StreamMemoryPool; set => StreamMemoryPool = value; }
}
