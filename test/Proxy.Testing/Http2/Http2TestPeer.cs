using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using System.Text;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;
using Proxy.Protocols;
using Proxy.Protocols.Http2;

namespace Proxy.Testing.Http2;

/// <summary>
/// A scripted HTTP/2 client over an in-memory transport: greet, send frames, expect frames. Headers are
/// compared decoded (the peer has its own HPACK encoder and decoder), never as HPACK bytes.
/// Every receive has a timeout (<see cref="ReceiveTimeout"/>) only to turn a hang into a clear failure.
/// </summary>
// Owned by the test (sends are serialised, receives must come from one task at a time).
public sealed class Http2TestPeer : IAsyncDisposable
{
    private readonly IDuplexPipe _client;
    private readonly Http2Connection? _connection;
    private readonly Task? _processTask;
    private readonly IDisposable? _transport;
    private readonly HpackEncoder _encoder = new(4096, useHuffman: false);
    private readonly HpackDecoder _decoder = new(4096, 1024 * 1024);
    private readonly SemaphoreSlim _sendLock = new(1, 1);
    private readonly List<Http2TestFrame> _received = new();
    private bool _closed;

    private Http2TestPeer(IDuplexPipe client, Http2Connection? connection, Task? processTask, IDisposable? transport = null)
    {
        _client = client;
        _connection = connection;
        _processTask = processTask;
        _transport = transport;
    }

    /// <summary>The in-memory server connection (not available when the peer talks to a remote server).</summary>
    public Http2Connection Connection => _connection ?? throw new InvalidOperationException("This peer talks to a remote server over a socket.");

    /// <summary>Completes when the server's ProcessAsync returned (in-memory peers only).</summary>
    public Task ProcessTask => _processTask ?? throw new InvalidOperationException("This peer talks to a remote server over a socket.");

    public TimeSpan ReceiveTimeout { get; set; } = TimeSpan.FromSeconds(20); // turns a hang into a failure on a loaded 2-core CI machine

    /// <summary>Largest frame the peer accepts (what it advertises as SETTINGS_MAX_FRAME_SIZE; 16,384 by default).</summary>
    public int MaxFrameSize { get; set; } = 16_384;

    /// <summary>WINDOW_UPDATE frames the Expect* helpers skipped over, in order.</summary>
    public List<Http2TestFrame> SkippedWindowUpdates { get; } = new();

    /// <summary>Every frame received so far (for failure messages).</summary>
    public IReadOnlyList<Http2TestFrame> ReceivedFrames => _received;

    public static Task<Http2TestPeer> StartAsync(Func<HttpExchange, Task> handler, Http2Options? options = null, TimeProvider? time = null)
        => StartAsync(new DelegateRequestHandler(handler), options, time);

    public static Task<Http2TestPeer> StartAsync(IHttpRequestHandler handler, Http2Options? options = null, TimeProvider? time = null)
        => StartAsync(handler, WorkScheduler.ThreadPool, options, time);

    /// <summary>
    /// A server connection whose read loop runs on <paramref name="loop"/> (the transport's reader resumes there, as on
    /// our epoll engine), with the loop's scheduler for its writer wakes and event-loop streams.
    /// </summary>
    public static async Task<Http2TestPeer> StartOnLoopAsync(IHttpRequestHandler handler, TestEventLoop loop, Http2Options? options = null,
        IProtocolMetrics? metrics = null)
    {
        var (server, client) = InMemoryDuplexPipe.CreatePair(
            new PipeOptions(readerScheduler: loop.PipeScheduler, useSynchronizationContext: false), PipeOptions.Default);
        var meta = new ConnectionMetadata { ConnectionId = "test-" + Guid.NewGuid().ToString("N")[..8], Scheduler = loop.Scheduler, Metrics = metrics };
        var connection = new Http2Connection(server, options ?? new Http2Options(), handler, meta, TimeProvider.System);
        var process = await loop.RunAsync(() => connection.ProcessAsync(CancellationToken.None));
        return new Http2TestPeer(client, connection, process);
    }

    /// <summary>A server connection whose read loop runs on the thread pool, with <paramref name="scheduler"/> as its scheduler.</summary>
    public static Task<Http2TestPeer> StartAsync(IHttpRequestHandler handler, WorkScheduler scheduler, Http2Options? options = null, TimeProvider? time = null)
    {
        var (server, client) = InMemoryDuplexPipe.CreatePair();
        var meta = new ConnectionMetadata { ConnectionId = "test-" + Guid.NewGuid().ToString("N")[..8], Scheduler = scheduler };
        var connection = new Http2Connection(server, options ?? new Http2Options(), handler, meta, time ?? TimeProvider.System);
        var process = Task.Run(() => connection.ProcessAsync(CancellationToken.None));
        return Task.FromResult(new Http2TestPeer(client, connection, process));
    }

    /// <summary>
    /// A peer for a real server on <paramref name="endPoint"/> (cleartext, prior knowledge): the same script
    /// API over a TCP socket. Nothing is sent yet; start with <see cref="HandshakeAsync"/>.
    /// </summary>
    public static async Task<Http2TestPeer> ConnectAsync(System.Net.EndPoint endPoint)
    {
        var socket = new System.Net.Sockets.Socket(System.Net.Sockets.SocketType.Stream, System.Net.Sockets.ProtocolType.Tcp) { NoDelay = true };
        try
        {
            await socket.ConnectAsync(endPoint);
        }
        catch
        {
            socket.Dispose();
            throw;
        }

        var stream = new System.Net.Sockets.NetworkStream(socket, ownsSocket: true);
        return new Http2TestPeer(new StreamDuplexPipe(stream), connection: null, processTask: null, transport: stream);
    }

    /// <summary>
    /// A scripted peer over any transport end: the backend side of a client connection under test (wrap the other end
    /// of an in-memory pair), or an accepted socket. Start with <see cref="ExpectClientPrefaceAsync"/>.
    /// </summary>
    public static Http2TestPeer Over(IDuplexPipe transport) => new(transport, connection: null, processTask: null);

    /// <summary>A scripted backend on an accepted TCP connection (see <see cref="Over"/>).</summary>
    public static Http2TestPeer Over(System.Net.Sockets.Socket accepted)
    {
        accepted.NoDelay = true;
        var stream = new System.Net.Sockets.NetworkStream(accepted, ownsSocket: true);
        return new Http2TestPeer(new StreamDuplexPipe(stream), connection: null, processTask: null, transport: stream);
    }

    /// <summary>Backend side: reads the client's connection preface octets (RFC 9113 §3.4), then its SETTINGS (returned).</summary>
    public async Task<IReadOnlyList<Http2Setting>> ExpectClientPrefaceAsync()
    {
        var preface = Http2FrameReader.ClientPreface.ToArray();
        using var timeout = new CancellationTokenSource(ReceiveTimeout);
        while (true)
        {
            var result = await _client.Input.ReadAsync(timeout.Token);
            if (result.Buffer.Length >= preface.Length)
            {
                var received = result.Buffer.Slice(0, preface.Length).ToArray();
                _client.Input.AdvanceTo(result.Buffer.GetPosition(preface.Length));
                Xunit.Assert.Equal(preface, received);
                return await ExpectSettingsAsync();
            }
            if (result.IsCompleted)
            {
                throw new Xunit.Sdk.XunitException("The client closed before its preface.");
            }
            _client.Input.AdvanceTo(result.Buffer.Start, result.Buffer.End);
        }
    }

    /// <summary>
    /// Backend side of the greeting: preface, our SETTINGS, ACK theirs. Returns the client's SETTINGS. The client's ACK
    /// of ours may come before or after its first streams (it need not wait for it), so from here on the Expect* helpers
    /// skip SETTINGS ACK frames (<see cref="SkipSettingsAcks"/>).
    /// </summary>
    public async Task<IReadOnlyList<Http2Setting>> AcceptHandshakeAsync(params Http2Setting[] settings)
    {
        var clientSettings = await ExpectClientPrefaceAsync();
        await SendSettingsAsync(settings);
        await SendSettingsAckAsync();
        SkipSettingsAcks = true;
        return clientSettings;
    }

    /// <summary>When set, <see cref="ReceiveSkippingWindowUpdatesAsync"/> also skips SETTINGS ACK frames.</summary>
    public bool SkipSettingsAcks { get; set; }

    /// <summary>Backend side: a response head (":status" first), optionally ending the stream.</summary>
    public Task SendResponseHeadersAsync(int streamId, int status, bool endStream, params (string Name, string Value)[] fields)
    {
        var list = new List<KeyValuePair<string, string>> { new(":status", status.ToString(System.Globalization.CultureInfo.InvariantCulture)) };
        list.AddRange(fields.Select(f => new KeyValuePair<string, string>(f.Name, f.Value)));
        return SendHeadersAsync(streamId, list, endStream);
    }

    // ---------------- Sending ----------------

    public Task SendPrefaceAsync() => SendBytesAsync(Http2FrameReader.ClientPreface.ToArray());

    public Task SendSettingsAsync(params Http2Setting[] settings)
        => SendAsync(w => Http2FrameWriter.WriteSettings(w, settings));

    public Task SendSettingsAckAsync() => SendAsync(Http2FrameWriter.WriteSettingsAck);

    /// <summary>Client preface followed by our SETTINGS (RFC 9113 §3.4).</summary>
    public async Task SendPrefaceAndSettingsAsync(params Http2Setting[] settings)
    {
        await SendPrefaceAsync();
        await SendSettingsAsync(settings);
    }

    /// <summary>
    /// The full greeting: preface + SETTINGS, expect the server's SETTINGS (returned), ACK them, and expect
    /// the server's ACK of ours. The server's connection WINDOW_UPDATE is skipped (see <see cref="SkippedWindowUpdates"/>).
    /// </summary>
    public async Task<IReadOnlyList<Http2Setting>> HandshakeAsync(params Http2Setting[] settings)
    {
        await SendPrefaceAndSettingsAsync(settings);
        var serverSettings = await ExpectSettingsAsync();
        await SendSettingsAckAsync();
        await ExpectSettingsAckAsync();
        return serverSettings;
    }

    /// <summary>Encodes <paramref name="headers"/> with the peer's HPACK encoder (pseudo-headers first, in the given order).</summary>
    public byte[] EncodeHeaders(IEnumerable<KeyValuePair<string, string>> headers)
    {
        var buffer = new ArrayBufferWriter<byte>();
        _encoder.BeginHeaderBlock(buffer);
        foreach (var (name, value) in headers)
        {
            _encoder.EncodeHeader(buffer, name, value);
        }
        return buffer.WrittenSpan.ToArray();
    }

    /// <summary>
    /// Encodes every field as a literal without indexing, bytes exactly as given (RFC 7541 §6.2.2): the way to
    /// send what a real encoder would fix up (uppercase names). Leaves the dynamic table untouched.
    /// </summary>
    public static byte[] EncodeHeadersRaw(IEnumerable<KeyValuePair<string, string>> headers)
    {
        var bytes = new List<byte>();
        foreach (var (name, value) in headers)
        {
            bytes.Add(0x00);
            AddString(bytes, Encoding.Latin1.GetBytes(name));
            AddString(bytes, Encoding.Latin1.GetBytes(value));
        }
        return bytes.ToArray();

        static void AddString(List<byte> output, byte[] text)
        {
            // 7-bit prefix integer (RFC 7541 §5.1), Huffman bit clear.
            var length = text.Length;
            if (length < 127)
            {
                output.Add((byte)length);
            }
            else
            {
                output.Add(127);
                length -= 127;
                while (length >= 128)
                {
                    output.Add((byte)(length % 128 + 128));
                    length /= 128;
                }
                output.Add((byte)length);
            }
            output.AddRange(text);
        }
    }

    public Task SendHeadersAsync(int streamId, IEnumerable<KeyValuePair<string, string>> headers, bool endStream)
        => SendHeaderBlockAsync(streamId, EncodeHeaders(headers), endStream, endHeaders: true);

    public Task SendHeaderBlockAsync(int streamId, byte[] block, bool endStream, bool endHeaders)
        => SendAsync(w => Http2FrameWriter.WriteHeaders(w, streamId, block, endStream, endHeaders));

    public Task SendContinuationAsync(int streamId, byte[] fragment, bool endHeaders)
        => SendAsync(w => Http2FrameWriter.WriteContinuation(w, streamId, fragment, endHeaders));

    /// <summary>A GET (or <paramref name="method"/>) with the usual pseudo-headers plus <paramref name="extra"/>.</summary>
    public Task SendRequestHeadersAsync(int streamId, string method = "GET", string path = "/", bool endStream = true, params (string Name, string Value)[] extra)
        => SendHeadersAsync(streamId, RequestHeaders(method, path, extra), endStream);

    public static List<KeyValuePair<string, string>> RequestHeaders(string method = "GET", string path = "/", params (string Name, string Value)[] extra)
    {
        var list = new List<KeyValuePair<string, string>>
        {
            new(":method", method),
            new(":scheme", "http"),
            new(":authority", "localhost"),
            new(":path", path),
        };
        list.AddRange(extra.Select(e => new KeyValuePair<string, string>(e.Name, e.Value)));
        return list;
    }

    public Task SendDataAsync(int streamId, ReadOnlyMemory<byte> data, bool endStream)
        => SendAsync(w => Http2FrameWriter.WriteData(w, streamId, data.Span, endStream));

    /// <summary>DATA with a PADDED flag and <paramref name="padLength"/> zero bytes of padding.</summary>
    public Task SendPaddedDataAsync(int streamId, ReadOnlyMemory<byte> data, byte padLength, bool endStream)
    {
        var payload = new byte[1 + data.Length + padLength];
        payload[0] = padLength;
        data.Span.CopyTo(payload.AsSpan(1));
        var flags = Http2FrameFlags.Padded | (endStream ? Http2FrameFlags.EndStream : Http2FrameFlags.None);
        return SendRawFrameAsync(Http2FrameType.Data, flags, streamId, payload);
    }

    public Task SendWindowUpdateAsync(int streamId, int increment)
        => SendAsync(w => Http2FrameWriter.WriteWindowUpdate(w, streamId, increment));

    public Task SendRstStreamAsync(int streamId, Http2ErrorCode code)
        => SendAsync(w => Http2FrameWriter.WriteRstStream(w, streamId, code));

    public Task SendPingAsync(ulong payload, bool ack = false)
        => SendAsync(w => Http2FrameWriter.WritePing(w, payload, ack));

    public Task SendGoAwayAsync(int lastStreamId, Http2ErrorCode code)
        => SendAsync(w => Http2FrameWriter.WriteGoAway(w, lastStreamId, code, default));

    public Task SendPriorityAsync(int streamId, int dependency, byte weight = 16)
        => SendAsync(w => Http2FrameWriter.WritePriority(w, streamId, dependency, false, weight));

    /// <summary>Any frame, byte for byte: the way to send what a well-behaved codec would refuse to write.</summary>
    public Task SendRawFrameAsync(Http2FrameType type, Http2FrameFlags flags, int streamId, ReadOnlySpan<byte> payload)
    {
        var bytes = new byte[Http2FrameHeader.Size + payload.Length];
        bytes[0] = (byte)(payload.Length >> 16);
        bytes[1] = (byte)(payload.Length >> 8);
        bytes[2] = (byte)payload.Length;
        bytes[3] = (byte)type;
        bytes[4] = (byte)flags;
        BinaryPrimitives.WriteInt32BigEndian(bytes.AsSpan(5), streamId & 0x7FFF_FFFF);
        payload.CopyTo(bytes.AsSpan(Http2FrameHeader.Size));
        return SendBytesAsync(bytes);
    }

    public Task SendRawFrameAsync(byte type, Http2FrameFlags flags, int streamId, ReadOnlySpan<byte> payload)
        => SendRawFrameAsync((Http2FrameType)type, flags, streamId, payload);

    public async Task SendBytesAsync(byte[] bytes)
    {
        await _sendLock.WaitAsync();
        try
        {
            await _client.Output.WriteAsync(bytes);
        }
        finally
        {
            _sendLock.Release();
        }
    }

    private async Task SendAsync(Action<IBufferWriter<byte>> write)
    {
        var buffer = new ArrayBufferWriter<byte>();
        write(buffer);
        await SendBytesAsync(buffer.WrittenSpan.ToArray());
    }

    /// <summary>Closes the client's sending side (the server sees end of input).</summary>
    public ValueTask CloseOutputAsync() => _client.Output.CompleteAsync();

    // ---------------- Receiving ----------------

    /// <summary>The next frame, whatever it is. Throws when the connection closes or nothing arrives in time.</summary>
    public async Task<Http2TestFrame> ReceiveFrameAsync()
        => await TryReceiveFrameAsync() ?? throw new InvalidOperationException("The server closed the connection. Received: " + Describe());

    /// <summary>The next frame, or null when the server closed the connection.</summary>
    public async Task<Http2TestFrame?> TryReceiveFrameAsync()
    {
        if (_closed)
        {
            return null;
        }
        using var timeout = new CancellationTokenSource(ReceiveTimeout);
        while (true)
        {
            ReadResult result;
            try
            {
                result = await _client.Input.ReadAsync(timeout.Token);
            }
            catch (OperationCanceledException)
            {
                throw new TimeoutException($"No frame from the server within {ReceiveTimeout}. Received so far: {Describe()}");
            }
            var buffer = result.Buffer;
            if (Http2FrameReader.TryReadFrame(ref buffer, MaxFrameSize, out var header, out var payload))
            {
                var frame = new Http2TestFrame(header, payload.ToArray());
                _client.Input.AdvanceTo(buffer.Start);
                _received.Add(frame);
                return frame;
            }
            if (result.IsCompleted)
            {
                _client.Input.AdvanceTo(buffer.End);
                _closed = true;
                return null;
            }
            _client.Input.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>The next frame that is not a WINDOW_UPDATE (those are recorded in <see cref="SkippedWindowUpdates"/>).</summary>
    public async Task<Http2TestFrame> ReceiveSkippingWindowUpdatesAsync()
    {
        while (true)
        {
            var frame = await ReceiveFrameAsync();
            if (SkipSettingsAcks && frame.Type == Http2FrameType.Settings && frame.IsAck)
            {
                continue;
            }
            if (frame.Type != Http2FrameType.WindowUpdate)
            {
                return frame;
            }
            SkippedWindowUpdates.Add(frame);
        }
    }

    public async Task<Http2TestFrame> ExpectFrameAsync(Http2FrameType type, int? streamId = null)
    {
        var frame = await ReceiveSkippingWindowUpdatesAsync();
        if (frame.Type != type || (streamId is { } id && frame.StreamId != id))
        {
            throw new Xunit.Sdk.XunitException($"Expected {type}{(streamId is null ? "" : " on stream " + streamId)}, got {frame}. Received: {Describe()}");
        }
        return frame;
    }

    public async Task<IReadOnlyList<Http2Setting>> ExpectSettingsAsync()
    {
        var frame = await ExpectFrameAsync(Http2FrameType.Settings);
        if (frame.IsAck)
        {
            throw new Xunit.Sdk.XunitException("Expected SETTINGS, got SETTINGS ACK.");
        }
        return frame.AsSettings();
    }

    public async Task ExpectSettingsAckAsync()
    {
        var frame = await ExpectFrameAsync(Http2FrameType.Settings);
        if (!frame.IsAck)
        {
            throw new Xunit.Sdk.XunitException("Expected SETTINGS ACK, got SETTINGS.");
        }
    }

    public async Task<PingFrame> ExpectPingAsync(bool ack)
    {
        var frame = await ExpectFrameAsync(Http2FrameType.Ping);
        var ping = frame.AsPing();
        if (ping.IsAck != ack)
        {
            throw new Xunit.Sdk.XunitException($"Expected PING ack={ack}, got ack={ping.IsAck}.");
        }
        return ping;
    }

    /// <summary>Reads HEADERS (+ CONTINUATION) on <paramref name="streamId"/> and decodes them with the peer's HPACK decoder.</summary>
    public async Task<Http2TestHeaders> ExpectHeadersAsync(int streamId)
    {
        var frame = await ExpectFrameAsync(Http2FrameType.Headers, streamId);
        return await DecodeHeaderBlockAsync(frame);
    }

    /// <summary>Decodes a HEADERS frame the caller already received, reading its CONTINUATION frames.</summary>
    public async Task<Http2TestHeaders> DecodeHeaderBlockAsync(Http2TestFrame headersFrame)
    {
        var parsed = Http2FrameReader.ReadHeaders(headersFrame.Header, headersFrame.PayloadSequence);
        var block = new ArrayBufferWriter<byte>();
        block.Write(parsed.HeaderBlockFragment.ToArray());
        var endHeaders = parsed.EndHeaders;
        while (!endHeaders)
        {
            var next = await ReceiveFrameAsync();
            if (next.Type != Http2FrameType.Continuation || next.StreamId != headersFrame.StreamId)
            {
                throw new Xunit.Sdk.XunitException($"Expected CONTINUATION on stream {headersFrame.StreamId}, got {next}.");
            }
            var continuation = Http2FrameReader.ReadContinuation(next.Header, next.PayloadSequence);
            block.Write(continuation.HeaderBlockFragment.ToArray());
            endHeaders = continuation.EndHeaders;
        }
        var collector = new FieldCollector();
        _decoder.Decode(new ReadOnlySequence<byte>(block.WrittenMemory), collector);
        return new Http2TestHeaders(headersFrame.StreamId, collector.Fields, parsed.EndStream);
    }

    public async Task<Http2TestFrame> ExpectDataAsync(int streamId)
        => await ExpectFrameAsync(Http2FrameType.Data, streamId);

    public async Task ExpectRstStreamAsync(int streamId, Http2ErrorCode code)
    {
        var frame = await ExpectFrameAsync(Http2FrameType.RstStream, streamId);
        var actual = frame.AsRstStream().ErrorCode;
        if (actual != code)
        {
            throw new Xunit.Sdk.XunitException($"Expected RST_STREAM {code} on stream {streamId}, got {actual}.");
        }
    }

    /// <summary>Expects GOAWAY with <paramref name="code"/> and returns its last stream id.</summary>
    public async Task<int> ExpectGoAwayAsync(Http2ErrorCode code)
    {
        var frame = await ExpectFrameAsync(Http2FrameType.GoAway, 0);
        var goAway = frame.AsGoAway();
        if (goAway.ErrorCode != code)
        {
            throw new Xunit.Sdk.XunitException($"Expected GOAWAY {code}, got {goAway.ErrorCode}. Received: {Describe()}");
        }
        return goAway.LastStreamId;
    }

    /// <summary>Expects the server to close the connection (end of its output), ignoring WINDOW_UPDATE frames before it.</summary>
    public async Task ExpectConnectionClosedAsync()
    {
        while (true)
        {
            var frame = await TryReceiveFrameAsync();
            if (frame is null)
            {
                return;
            }
            if (frame.Type != Http2FrameType.WindowUpdate)
            {
                throw new Xunit.Sdk.XunitException($"Expected the connection to close, got {frame}.");
            }
        }
    }

    /// <summary>Expects GOAWAY with <paramref name="code"/> followed by the end of the connection.</summary>
    public async Task<int> ExpectGoAwayAndCloseAsync(Http2ErrorCode code)
    {
        var last = await ExpectGoAwayAsync(code);
        await ExpectConnectionClosedAsync();
        return last;
    }

    /// <summary>
    /// Reads a whole response on <paramref name="streamId"/> (HEADERS, DATA, optional trailers), giving the
    /// server window back after every DATA frame when <paramref name="grantWindow"/> is set.
    /// Frames of other streams are not expected here.
    /// </summary>
    public async Task<Http2TestResponse> ReadResponseAsync(int streamId, bool grantWindow = true)
    {
        var headers = await ExpectHeadersAsync(streamId);
        var body = new MemoryStream();
        Http2TestHeaders? trailers = null;
        var ended = headers.EndStream;
        while (!ended)
        {
            var frame = await ReceiveSkippingWindowUpdatesAsync();
            if (frame.StreamId != streamId)
            {
                throw new Xunit.Sdk.XunitException($"Expected a frame on stream {streamId}, got {frame}.");
            }
            if (frame.Type == Http2FrameType.Headers)
            {
                trailers = await DecodeHeaderBlockAsync(frame);
                ended = trailers.EndStream;
                continue;
            }
            if (frame.Type != Http2FrameType.Data)
            {
                throw new Xunit.Sdk.XunitException($"Unexpected {frame} in a response.");
            }
            var data = frame.AsData();
            body.Write(data.Data.ToArray());
            ended = data.EndStream;
            if (grantWindow && data.FlowControlledLength > 0)
            {
                await SendWindowUpdateAsync(0, data.FlowControlledLength);
                if (!ended)
                {
                    await SendWindowUpdateAsync(streamId, data.FlowControlledLength);
                }
            }
        }
        return new Http2TestResponse(headers, body.ToArray(), trailers);
    }

    private string Describe() => string.Join(", ", _received.TakeLast(20));

    public async ValueTask DisposeAsync()
    {
        // Stop reading first so a server writer waiting on backpressure is released, then hang up.
        await _client.Input.CompleteAsync();
        await _client.Output.CompleteAsync();
        if (_transport is not null)
        {
            _transport.Dispose();
            return;
        }

        if (_processTask is null)
        {
            return; // a scripted backend over a pipe: the client under test owns the other end
        }

        try
        {
            await ProcessTask.WaitAsync(TimeSpan.FromSeconds(20));
        }
        catch (TimeoutException)
        {
            Connection.Abort();
        }
    }

    /// <summary>A stream (a socket's NetworkStream) seen as a duplex pipe.</summary>
    private sealed class StreamDuplexPipe(Stream stream) : IDuplexPipe
    {
        public PipeReader Input { get; } = PipeReader.Create(stream, new StreamPipeReaderOptions(leaveOpen: true));

        public PipeWriter Output { get; } = PipeWriter.Create(stream, new StreamPipeWriterOptions(leaveOpen: true));
    }

    private sealed class FieldCollector : IHpackHeaderHandler
    {
        public List<KeyValuePair<string, string>> Fields { get; } = new();

        public void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
            => Fields.Add(new(Encoding.Latin1.GetString(name), Encoding.Latin1.GetString(value)));
    }
}

/// <summary>A whole response as the peer received it.</summary>
public sealed record Http2TestResponse(Http2TestHeaders Headers, byte[] Body, Http2TestHeaders? Trailers)
{
    public string Status => Headers[":status"] ?? "";
    public string BodyText => Encoding.UTF8.GetString(Body);
}
