using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;
using Proxy.Protocols;
using Proxy.Protocols.Http2;

namespace Proxy.Benchmarks.Http2;

/// <summary>
/// A lean HTTP/2 client for the connection benchmark, joined to an <see cref="Http2Connection"/> by two
/// in-memory pipes. It sends requests in waves (N streams' HEADERS + DATA in one write and one flush) and
/// reads until every stream of the wave has ended. Its per-request work is a few frame writes, one warm
/// HPACK decode (5 indexed fields) and a frame parse, so the server side dominates the measurement.
/// </summary>
/// <remarks>
/// NOTE: the request header block is encoded once. The first stream carries the cold block (literals
/// with incremental indexing); every later stream repeats the warm block (only indexes), which leaves the
/// server's decoder table unchanged, so resending the same bytes is valid HPACK.
/// </remarks>
// Owned by the benchmark thread: one wave at a time.
internal sealed class Http2BenchClient : IAsyncDisposable
{
    private const int WindowUpdateThreshold = 32 * 1024;

    private readonly PipeReader _input;
    private readonly PipeWriter _output;
    private readonly Task _process;
    private readonly HpackDecoder _decoder = new();
    private readonly ResponseChecker _checker = new();
    private readonly byte[] _coldBlock;
    private readonly byte[] _warmBlock;
    private bool _coldBlockSent;
    private int _nextStreamId = 1;
    private long _unacknowledgedData;

    private Http2BenchClient(PipeReader input, PipeWriter output, Task process)
    {
        _input = input;
        _output = output;
        _process = process;
        var encoder = new HpackEncoder();
        _coldBlock = Encode(encoder);
        _warmBlock = Encode(encoder);
    }

    /// <summary>Requests completed (their response ended with END_STREAM) since the start.</summary>
    public long Completed { get; private set; }

    /// <param name="metrics">What the connection reports to (the server's metrics), or null as in a host without them.</param>
    public static async Task<Http2BenchClient> StartAsync(IHttpRequestHandler handler, Http2Options options, IProtocolMetrics? metrics = null)
    {
        // Default pipe options: continuations run on the thread pool, as with a socket transport.
        var clientToServer = new Pipe();
        var serverToClient = new Pipe();
        var meta = new ConnectionMetadata { ConnectionId = "bench", IsTls = false, Metrics = metrics };
        var connection = new Http2Connection(new DuplexPipe(clientToServer.Reader, serverToClient.Writer), options, handler, meta, TimeProvider.System);
        var process = Task.Run(() => connection.ProcessAsync(CancellationToken.None));
        var client = new Http2BenchClient(serverToClient.Reader, clientToServer.Writer, process);
        await client.HandshakeAsync();
        return client;
    }

    /// <summary>RFC 9113 §3.4: preface + SETTINGS; ACK the server's SETTINGS and wait for the ACK of ours.</summary>
    private async Task HandshakeAsync()
    {
        _output.Write(Http2FrameReader.ClientPreface);
        Http2FrameWriter.WriteSettings(_output, [new(Http2SettingsParameter.EnablePush, 0)]);
        await _output.FlushAsync();

        bool serverSettings = false;
        bool ourSettingsAcked = false;
        while (!serverSettings || !ourSettingsAcked)
        {
            var result = await _input.ReadAsync();
            var buffer = result.Buffer;
            while (Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out _))
            {
                if (header.Type == Http2FrameType.Settings && header.HasFlag(Http2FrameFlags.Ack))
                {
                    ourSettingsAcked = true;
                }
                else if (header.Type == Http2FrameType.Settings)
                {
                    serverSettings = true;
                    Http2FrameWriter.WriteSettingsAck(_output);
                }
                else if (header.Type == Http2FrameType.GoAway)
                {
                    throw new InvalidOperationException("The server sent GOAWAY during the handshake.");
                }
            }
            _input.AdvanceTo(buffer.Start, buffer.End);
            if (result.IsCompleted)
            {
                throw new InvalidOperationException("The server closed the connection during the handshake.");
            }
            await _output.FlushAsync();
        }
    }

    /// <summary>Sends <paramref name="count"/> unary requests on new streams in one write, then reads until all have ended.</summary>
    public async ValueTask RunWaveAsync(int count)
    {
        // Step 1: return connection credit for the response DATA read so far (RFC 9113 §6.9), batched.
        if (_unacknowledgedData >= WindowUpdateThreshold)
        {
            Http2FrameWriter.WriteWindowUpdate(_output, 0, (int)_unacknowledgedData);
            _unacknowledgedData = 0;
        }

        // Step 2: the requests, one flush for the whole wave.
        for (int i = 0; i < count; i++)
        {
            int streamId = _nextStreamId;
            _nextStreamId += 2;
            byte[] block = _coldBlockSent ? _warmBlock : _coldBlock;
            _coldBlockSent = true;
            Http2FrameWriter.WriteHeaders(_output, streamId, block, endStream: false, endHeaders: true);
            Http2FrameWriter.WriteData(_output, streamId, GrpcUnaryHandler.Message, endStream: true);
        }
        await _output.FlushAsync();

        // Step 3: read until every stream of the wave has ended.
        int ended = 0;
        while (ended < count)
        {
            var result = await _input.ReadAsync();
            var buffer = result.Buffer;
            while (Http2FrameReader.TryReadFrame(ref buffer, Http2FrameReader.DefaultMaxFrameSize, out var header, out var payload))
            {
                if (OnFrame(header, payload))
                {
                    ended++;
                }
            }
            _input.AdvanceTo(buffer.Start, buffer.End);
            if (result.IsCompleted && ended < count)
            {
                throw new InvalidOperationException($"The server closed the connection with {count - ended} responses outstanding.");
            }
        }
        Completed += count;
    }

    /// <summary>Returns true when the frame ended a stream.</summary>
    private bool OnFrame(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        switch (header.Type)
        {
            case Http2FrameType.Headers:
                var headers = Http2FrameReader.ReadHeaders(header, payload);
                if (!headers.EndHeaders)
                {
                    throw new InvalidOperationException("The benchmark client does not expect CONTINUATION.");
                }
                _checker.Begin(trailers: headers.EndStream);
                _decoder.Decode(headers.HeaderBlockFragment, _checker);
                _checker.End(header.StreamId);
                return headers.EndStream;
            case Http2FrameType.Data:
                var data = Http2FrameReader.ReadData(header, payload);
                _unacknowledgedData += data.FlowControlledLength;
                return data.EndStream;
            case Http2FrameType.RstStream:
                throw new InvalidOperationException($"The server reset stream {header.StreamId}: {Http2FrameReader.ReadRstStream(header, payload).ErrorCode}.");
            case Http2FrameType.GoAway:
                throw new InvalidOperationException($"The server sent GOAWAY: {Http2FrameReader.ReadGoAway(header, payload).ErrorCode}.");
            default:
                return false; // WINDOW_UPDATE (credit for our DATA), SETTINGS, PING: nothing to do here
        }
    }

    public async ValueTask DisposeAsync()
    {
        // Closing our side ends the server's read loop; it completes its output in turn.
        await _output.CompleteAsync();
        await _process.WaitAsync(TimeSpan.FromSeconds(10));
        await _input.CompleteAsync();
    }

    private static byte[] Encode(HpackEncoder encoder)
    {
        var buffer = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(buffer);
        foreach (var (name, value) in GrpcHeaders.Request)
        {
            encoder.EncodeHeader(buffer, name, value);
        }
        return buffer.WrittenSpan.ToArray();
    }

    private sealed class DuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
    {
        public PipeReader Input { get; } = input;
        public PipeWriter Output { get; } = output;
    }

    /// <summary>Checks each response cheaply: HEADERS carry :status 200, trailers carry grpc-status 0.</summary>
    // Owned by the benchmark thread.
    private sealed class ResponseChecker : IHpackHeaderHandler
    {
        private bool _trailers;
        private bool _ok;

        public void Begin(bool trailers)
        {
            _trailers = trailers;
            _ok = false;
        }

        public void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
        {
            if (_trailers ? name.SequenceEqual("grpc-status"u8) && value.SequenceEqual("0"u8)
                          : name.SequenceEqual(":status"u8) && value.SequenceEqual("200"u8))
            {
                _ok = true;
            }
        }

        public void End(int streamId)
        {
            if (!_ok)
            {
                throw new InvalidOperationException($"Stream {streamId}: unexpected {(_trailers ? "trailers" : "response headers")}.");
            }
        }
    }
}
