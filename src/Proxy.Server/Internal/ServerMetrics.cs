using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Net.Sockets;
using System.Security.Authentication;
using Proxy.Codecs.Http2;
using Proxy.Transport;

namespace Proxy.Server.Internal;

/// <summary>
/// The "Proxy.Server" meter. Connection instruments keep Kestrel's names, units and attributes
/// ("Microsoft.AspNetCore.Server.Kestrel": kestrel.*) so dashboards built for Kestrel read ours; the proxy.server.*
/// instruments are ours (HTTP/2 streams, resets, GOAWAY, flow-control stalls, writer batches, socket bytes).
/// </summary>
/// <remarks>
/// NOTE: cheap by construction, as the engines call it per request, per flush and per socket operation: the
/// per-stream level and the socket byte counts are Interlocked counts that observable instruments report when
/// collected (no measurement per call to any listener); every other method checks <see cref="Instrument.Enabled"/>
/// first (a bool read when nobody listens), and every tag set of the hot path is a precomputed array (no boxing, no
/// TagList growth). Per-connection tags (server.address ...) are built once per listener.
/// </remarks>
// Shared by every connection of one server: instruments are thread-safe, the counts Interlocked, the tag arrays immutable.
internal sealed class ServerMetrics : IProtocolMetrics, ISocketIoMetrics, ITlsHandshakeMetrics
{
    public const string MeterName = "Proxy.Server";

    // OpenTelemetry's advice for seconds histograms: short (requests, handshakes) and long (connections).
    private static readonly double[] ShortSeconds = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
    private static readonly double[] LongSeconds = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];
    private static readonly double[] StallSeconds = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30];
    private static readonly int[] BatchFrames = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];
    private static readonly long[] BatchBytes = [64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576];

    private readonly UpDownCounter<long> _activeConnections;
    private readonly Histogram<double> _connectionDuration;
    private readonly Histogram<double> _tlsHandshakeDuration;
    private readonly UpDownCounter<long> _activeTlsHandshakes;
    private readonly Counter<long> _connections;
    // Per-stream and per-socket-operation levels are plain counts the meter reads when collected (observable
    // instruments): an Interlocked add on the hot path instead of a measurement delivered to every listener.
    private long _activeStreams;
    private long _bytesReceived;
    private long _bytesSent;
    private readonly Counter<long> _streamResets;
    private readonly Counter<long> _refusedStreams;
    private readonly Counter<long> _goAways;
    private readonly Histogram<double> _stallDuration;
    private readonly Histogram<int> _batchFrames;
    private readonly Histogram<long> _batchBytes;
    private readonly Histogram<double> _acceptPauseDuration;
    // The bound on open connections the server runs with, 0 for none (set at start).
    private long _connectionLimit;

    private static readonly KeyValuePair<string, object?>[] PausedAtLimitTags = [new("proxy.accept.pause_reason", "connection_limit")];
    private static readonly KeyValuePair<string, object?>[] PausedOutOfResourcesTags = [new("proxy.accept.pause_reason", "out_of_resources")];
    private static readonly KeyValuePair<string, object?>[] ReceiveTags = [new("network.io.direction", "receive")];
    private static readonly KeyValuePair<string, object?>[] TransmitTags = [new("network.io.direction", "transmit")];
    // [sent ? 1 : 0][error code]: proxy.side and error.type of resets and GOAWAYs.
    private static readonly KeyValuePair<string, object?>[][][] SideCodeTags = BuildSideCodeTags();
    // [http2 ? 1 : 0][tls ? 1 : 0] of proxy.server.connections.
    private static readonly KeyValuePair<string, object?>[][][] ConnectionTags =
    [
        [[new("network.protocol.version", "1.1"), new("tls", "false")], [new("network.protocol.version", "1.1"), new("tls", "true")]],
        [[new("network.protocol.version", "2"), new("tls", "false")], [new("network.protocol.version", "2"), new("tls", "true")]],
    ];

    public ServerMetrics(IMeterFactory meterFactory)
    {
        var meter = meterFactory.Create(MeterName);
        _activeConnections = meter.CreateUpDownCounter<long>("kestrel.active_connections", "{connection}",
            "Number of connections that are currently active on the server.");
        _connectionDuration = meter.CreateHistogram("kestrel.connection.duration", "s", "The duration of connections on the server.",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = LongSeconds });
        _tlsHandshakeDuration = meter.CreateHistogram("kestrel.tls_handshake.duration", "s", "The duration of TLS handshakes on the server.",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = ShortSeconds });
        _activeTlsHandshakes = meter.CreateUpDownCounter<long>("kestrel.active_tls_handshakes", "{handshake}",
            "Number of TLS handshakes that are currently in progress on the server.");
        _connections = meter.CreateCounter<long>("proxy.server.connections", "{connection}",
            "Connections accepted, counted once their HTTP version is known (network.protocol.version, tls).");
        meter.CreateObservableUpDownCounter("proxy.server.http2.active_streams", () => Volatile.Read(ref _activeStreams), "{stream}",
            "HTTP/2 streams whose request is being handled by the app.");
        _streamResets = meter.CreateCounter<long>("proxy.server.http2.stream_resets", "{stream}",
            "RST_STREAM frames sent or received (proxy.side), by RFC 9113 error code (error.type).");
        _refusedStreams = meter.CreateCounter<long>("proxy.server.http2.refused_streams", "{stream}",
            "HTTP/2 streams refused with REFUSED_STREAM (over the concurrency limit, or after GOAWAY).");
        _goAways = meter.CreateCounter<long>("proxy.server.http2.goaways", "{frame}",
            "GOAWAY frames sent or received (proxy.side), by RFC 9113 error code (error.type).");
        _stallDuration = meter.CreateHistogram("proxy.server.http2.flow_control.stall_duration", "s",
            "Time a stream with data to send waited for send window (stream or connection).",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = StallSeconds });
        _batchFrames = meter.CreateHistogram("proxy.server.writer.batch.frames", "{frame}",
            "HTTP/2 frames per transport write of the frame-writer loop.",
            advice: new InstrumentAdvice<int> { HistogramBucketBoundaries = BatchFrames });
        _batchBytes = meter.CreateHistogram("proxy.server.writer.batch.bytes", "By",
            "Bytes per transport write of the HTTP/2 frame-writer loop.",
            advice: new InstrumentAdvice<long> { HistogramBucketBoundaries = BatchBytes });
        meter.CreateObservableCounter("proxy.server.io", ObserveIo, "By", "Bytes received from and sent to client sockets (network.io.direction).");
        meter.CreateObservableGauge("proxy.server.connection_limit", ObserveConnectionLimit, "{connection}",
            "The bound on open connections (ProxyServer:MaxConcurrentConnections, or the default from the open-file limit); none when unbounded.");
        _acceptPauseDuration = meter.CreateHistogram("proxy.server.accept.pause_duration", "s",
            "Time an accept loop stood still (proxy.accept.pause_reason: connection_limit, out_of_resources); new clients wait in the listen backlog meanwhile.",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = LongSeconds });
    }

    // ---- Connections (accept loop, connection flow) ----

    /// <summary>The bound the server started with (null: none), reported by <c>proxy.server.connection_limit</c>.</summary>
    public void SetConnectionLimit(long? max) => Volatile.Write(ref _connectionLimit, max ?? 0);

    private IEnumerable<Measurement<long>> ObserveConnectionLimit()
    {
        var max = Volatile.Read(ref _connectionLimit);
        return max > 0 ? [new Measurement<long>(max)] : [];
    }

    /// <summary>An accept loop stood still for <paramref name="duration"/>: at the connection bound, or out of descriptors or buffers.</summary>
    public void AcceptPaused(TimeSpan duration, bool atConnectionLimit)
    {
        if (_acceptPauseDuration.Enabled)
        {
            _acceptPauseDuration.Record(duration.TotalSeconds, atConnectionLimit ? PausedAtLimitTags : PausedOutOfResourcesTags);
        }
    }

    /// <summary>Kestrel's endpoint attributes for connections accepted on <paramref name="endPoint"/>, built once per listener.</summary>
    public static KeyValuePair<string, object?>[] EndpointTags(EndPoint endPoint) => endPoint switch
    {
        IPEndPoint ip =>
        [
            new("server.address", ip.Address.ToString()),
            new("server.port", ip.Port),
            new("network.type", ip.AddressFamily == AddressFamily.InterNetworkV6 ? "ipv6" : "ipv4"),
            new("network.transport", "tcp"),
        ],
        UnixDomainSocketEndPoint unix => [new("server.address", unix.ToString()), new("network.transport", "unix")],
        _ => [new("server.address", endPoint.ToString()), new("network.transport", endPoint.AddressFamily.ToString())],
    };

    /// <summary>At accept. Returns whether the connection was counted active, so its end takes back exactly what it added.</summary>
    public bool ConnectionStarted(KeyValuePair<string, object?>[] endpointTags)
    {
        if (!_activeConnections.Enabled)
        {
            return false;
        }
        _activeConnections.Add(1, endpointTags);
        return true;
    }

    public void ProtocolChosen(bool http2, bool tls)
    {
        if (_connections.Enabled)
        {
            _connections.Add(1, ConnectionTags[http2 ? 1 : 0][tls ? 1 : 0]);
        }
    }

    /// <param name="protocolVersion">"1.1", "2", or null when the connection ended before choosing.</param>
    public void ConnectionEnded(KeyValuePair<string, object?>[] endpointTags, bool countedActive, long startTimestamp,
        string? protocolVersion, SslProtocols? tls, string? errorType)
    {
        if (countedActive)
        {
            _activeConnections.Add(-1, endpointTags);
        }
        if (!_connectionDuration.Enabled)
        {
            return;
        }
        var tags = new TagList(endpointTags);
        if (protocolVersion is not null)
        {
            tags.Add("network.protocol.name", "http");
            tags.Add("network.protocol.version", protocolVersion);
        }
        if (tls is { } protocol && TlsVersion(protocol) is { } version)
        {
            tags.Add("tls.protocol.version", version);
        }
        if (errorType is not null)
        {
            tags.Add("error.type", errorType);
        }
        _connectionDuration.Record(Stopwatch.GetElapsedTime(startTimestamp).TotalSeconds, tags);
    }

    // ---- TLS (Transport's middleware) ----

    public bool HandshakeStarted(ConnectionContext connection)
    {
        if (!_activeTlsHandshakes.Enabled)
        {
            return false;
        }
        _activeTlsHandshakes.Add(1, TagsOf(connection));
        return true;
    }

    public void HandshakeEnded(ConnectionContext connection, bool counted, TimeSpan duration, SslProtocols? protocol, Exception? error, bool timedOut)
    {
        var endpoint = TagsOf(connection);
        if (counted)
        {
            _activeTlsHandshakes.Add(-1, endpoint);
        }
        if (!_tlsHandshakeDuration.Enabled)
        {
            return;
        }
        var tags = new TagList(endpoint);
        if (protocol is { } p && TlsVersion(p) is { } version)
        {
            tags.Add("tls.protocol.version", version);
        }
        if (timedOut)
        {
            tags.Add("error.type", "timeout");
        }
        else if (error is not null)
        {
            tags.Add("error.type", error.GetType().FullName);
        }
        _tlsHandshakeDuration.Record(duration.TotalSeconds, tags);
    }

    private static ReadOnlySpan<KeyValuePair<string, object?>> TagsOf(ConnectionContext connection)
        => connection.Features.Get<ServerConnection>()?.EndpointTags ?? [];

    // ---- Sockets ----

    public void Received(int bytes) => Interlocked.Add(ref _bytesReceived, bytes);

    public void Sent(long bytes) => Interlocked.Add(ref _bytesSent, bytes);

    private IEnumerable<Measurement<long>> ObserveIo() =>
    [
        new(Volatile.Read(ref _bytesReceived), ReceiveTags),
        new(Volatile.Read(ref _bytesSent), TransmitTags),
    ];

    // ---- HTTP/2 engine ----

    public bool StreamStarted()
    {
        Interlocked.Increment(ref _activeStreams);
        return true;
    }

    public void StreamEnded() => Interlocked.Decrement(ref _activeStreams);

    public void StreamReset(bool sent, Http2ErrorCode code)
    {
        if (_streamResets.Enabled)
        {
            _streamResets.Add(1, SideCode(sent, code));
        }
    }

    public void StreamRefused()
    {
        if (_refusedStreams.Enabled)
        {
            _refusedStreams.Add(1);
        }
    }

    public void GoAway(bool sent, Http2ErrorCode code)
    {
        if (_goAways.Enabled)
        {
            _goAways.Add(1, SideCode(sent, code));
        }
    }

    public bool FlowControlStallEnabled => _stallDuration.Enabled;

    public void FlowControlStalled(TimeSpan duration) => _stallDuration.Record(duration.TotalSeconds);

    public bool WriterBatchEnabled => _batchFrames.Enabled || _batchBytes.Enabled;

    public void WriterBatch(int frames, long bytes)
    {
        _batchFrames.Record(frames);
        _batchBytes.Record(bytes);
    }

    /// <summary>The RFC 9113 §7 name of an error code (NO_ERROR, PROTOCOL_ERROR ...), "0x..." for one it does not define.</summary>
    public static string ErrorCodeName(Http2ErrorCode code) => code switch
    {
        Http2ErrorCode.NoError => "NO_ERROR",
        Http2ErrorCode.ProtocolError => "PROTOCOL_ERROR",
        Http2ErrorCode.InternalError => "INTERNAL_ERROR",
        Http2ErrorCode.FlowControlError => "FLOW_CONTROL_ERROR",
        Http2ErrorCode.SettingsTimeout => "SETTINGS_TIMEOUT",
        Http2ErrorCode.StreamClosed => "STREAM_CLOSED",
        Http2ErrorCode.FrameSizeError => "FRAME_SIZE_ERROR",
        Http2ErrorCode.RefusedStream => "REFUSED_STREAM",
        Http2ErrorCode.Cancel => "CANCEL",
        Http2ErrorCode.CompressionError => "COMPRESSION_ERROR",
        Http2ErrorCode.ConnectError => "CONNECT_ERROR",
        Http2ErrorCode.EnhanceYourCalm => "ENHANCE_YOUR_CALM",
        Http2ErrorCode.InadequateSecurity => "INADEQUATE_SECURITY",
        Http2ErrorCode.Http11Required => "HTTP_1_1_REQUIRED",
        _ => "0x" + ((uint)code).ToString("x", System.Globalization.CultureInfo.InvariantCulture),
    };

    private static KeyValuePair<string, object?>[] SideCode(bool sent, Http2ErrorCode code)
    {
        var byCode = SideCodeTags[sent ? 1 : 0];
        return (uint)code < (uint)byCode.Length
            ? byCode[(int)code]
            : [new("proxy.side", sent ? "sent" : "received"), new("error.type", ErrorCodeName(code))]; // not in RFC 9113: rare
    }

    private static KeyValuePair<string, object?>[][][] BuildSideCodeTags()
    {
        var result = new KeyValuePair<string, object?>[2][][];
        for (var side = 0; side < 2; side++)
        {
            result[side] = new KeyValuePair<string, object?>[(int)Http2ErrorCode.Http11Required + 1][];
            for (var code = 0; code < result[side].Length; code++)
            {
                result[side][code] = [new("proxy.side", side == 1 ? "sent" : "received"), new("error.type", ErrorCodeName((Http2ErrorCode)code))];
            }
        }
        return result;
    }

    /// <summary>Kestrel's tls.protocol.version values ("1.2", "1.3").</summary>
    private static string? TlsVersion(SslProtocols protocol) => protocol switch
    {
        SslProtocols.Tls12 => "1.2",
        SslProtocols.Tls13 => "1.3",
#pragma warning disable CS0618, SYSLIB0039 // Obsolete versions: named if ever negotiated.
        SslProtocols.Tls11 => "1.1",
        SslProtocols.Tls => "1.0",
#pragma warning restore CS0618, SYSLIB0039
        _ => null,
    };
}
