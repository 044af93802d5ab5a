using System.Buffers.Text;
using System.Text;
using Proxy.Protocols;

namespace Proxy.Benchmarks.Http1;

/// <summary>
/// A lean HTTP/1.1 client for the connection benchmarks, joined to a server engine by two in-memory pipes
/// (default options: continuations on the thread pool, as with a socket transport). It writes
/// <c>depth</c> keep-alive GETs in one write and one flush (depth 1 is h2load's <c>--h1 -m1</c>: one
/// request, wait for its response) and reads until all their responses have arrived. Per response it finds
/// the end of the head, checks the status line and reads Content-Length, so the server dominates.
/// </summary>
// Owned by the benchmark thread: one batch at a time.
internal sealed class Http1BenchClient : IAsyncDisposable
{
    /// <summary>What h2load sends for <c>h2load --h1 http://127.0.0.1:18080/size/100</c>.</summary>
    public static readonly byte[] Request = Encoding.ASCII.GetBytes(
        "GET /size/100 HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nUser-Agent: h2load nghttp2/1.52.0\r\n\r\n");

    private readonly PipeReader _input;
    private readonly PipeWriter _output;
    private readonly Task _process;
    private readonly int _expectedBodyLength;

    private Http1BenchClient(PipeReader input, PipeWriter output, Task process, int expectedBodyLength)
    {
        _input = input;
        _output = output;
        _process = process;
        _expectedBodyLength = expectedBodyLength;
    }

    /// <summary>Starts <paramref name="serve"/> (the server side of the connection) on the thread pool.</summary>
    public static Http1BenchClient Start(Func<IDuplexPipe, Task> serve, int expectedBodyLength)
    {
        var clientToServer = new Pipe();
        var serverToClient = new Pipe();
        var transport = new DuplexPipe(clientToServer.Reader, serverToClient.Writer);
        var process = Task.Run(() => serve(transport));
        return new Http1BenchClient(serverToClient.Reader, clientToServer.Writer, process, expectedBodyLength);
    }

    /// <summary>Sends <paramref name="depth"/> requests in one flush, then reads their responses.</summary>
    public async ValueTask RunBatchAsync(int depth)
    {
        for (int i = 0; i < depth; i++)
        {
            _output.Write(Request);
        }
        await _output.FlushAsync();

        int received = 0;
        while (received < depth)
        {
            var result = await _input.ReadAsync();
            var buffer = result.Buffer;
            while (received < depth && TryReadResponse(ref buffer))
            {
                received++;
            }
            _input.AdvanceTo(buffer.Start, buffer.End);
            if (result.IsCompleted && received < depth)
            {
                throw new InvalidOperationException($"The server closed the connection with {depth - received} responses outstanding.");
            }
        }
    }

    /// <summary>One whole response (head and Content-Length body) off the front of <paramref name="buffer"/>, or false.</summary>
    private bool TryReadResponse(ref ReadOnlySequence<byte> buffer)
    {
        var reader = new SequenceReader<byte>(buffer);
        if (!reader.TryReadTo(out ReadOnlySequence<byte> head, "\r\n\r\n"u8, advancePastDelimiter: true))
        {
            return false;
        }
        // Heads are a few hundred octets: one copy onto the stack keeps the checks simple.
        Span<byte> text = stackalloc byte[(int)head.Length];
        head.CopyTo(text);
        if (!text.StartsWith("HTTP/1.1 200 "u8))
        {
            throw new InvalidOperationException("Unexpected response: " + Encoding.Latin1.GetString(text));
        }
        int at = text.IndexOf("\r\nContent-Length: "u8);
        if (at < 0 || !Utf8Parser.TryParse(text[(at + 18)..], out int length, out _) || length != _expectedBodyLength)
        {
            throw new InvalidOperationException("Unexpected response framing: " + Encoding.Latin1.GetString(text));
        }
        if (reader.Remaining < length)
        {
            return false;
        }
        reader.Advance(length);
        buffer = buffer.Slice(reader.Position);
        return true;
    }

    public async ValueTask DisposeAsync()
    {
        // Closing our side ends the server's loop; it completes its output in turn.
        await _output.CompleteAsync();
        await _process.WaitAsync(TimeSpan.FromSeconds(10));
        await _input.CompleteAsync();
    }

    private sealed class DuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
    {
        public PipeReader Input { get; } = input;
        public PipeWriter Output { get; } = output;
    }
}
