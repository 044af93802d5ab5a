using Microsoft.Extensions.Time.Testing;
using System.Buffers;
using System.IO.Pipelines;
using System.Text;
using Proxy.Protocols.Http1;
using Proxy.Testing;

namespace Proxy.Protocols.Tests.Http1;

/// <summary>A response as the test client saw it on the wire.</summary>
internal sealed record RawResponse(int Status, string Reason, List<(string Name, string Value)> Headers, string Body, List<(string Name, string Value)> Trailers)
{
    public string? Header(string name) => Headers.FirstOrDefault(h => h.Name.Equals(name, StringComparison.OrdinalIgnoreCase)).Value;
}

/// <summary>Drives an <see cref="Http1Connection"/> over two in-memory pipes with raw bytes.</summary>
// Owned by one test.
internal sealed class Http1Harness : IAsyncDisposable
{
    private static readonly TimeSpan Guard = TimeSpan.FromSeconds(10);
    private readonly List<byte> _received = new();
    private bool _serverOutputDone;

    public Http1Harness(Func<HttpExchange, Task> handler, Http1Options? options = null, PipeOptions? toServerOptions = null,
        PipeOptions? toClientOptions = null)
    {
        ToServer = new Pipe(toServerOptions ?? PipeOptions.Default);
        ToClient = new Pipe(toClientOptions ?? PipeOptions.Default);
        Options = options ?? new Http1Options();
        Connection = new Http1Connection(new DuplexPipe(ToServer.Reader, ToClient.Writer), Options, new DelegateHandler(handler),
            new ConnectionMetadata { ConnectionId = "test" }, Time);
        Processing = Connection.ProcessAsync(CancellationToken.None);
    }

    public Pipe ToServer { get; }
    public Pipe ToClient { get; }
    public FakeTimeProvider Time { get; } = new();
    public Http1Options Options { get; }
    public Http1Connection Connection { get; }
    public Task Processing { get; }

    public async Task SendAsync(string text)
    {
        await ToServer.Writer.WriteAsync(Encoding.Latin1.GetBytes(text)).AsTask().WaitAsync(Guard);
    }

    public void CloseClient() => ToServer.Writer.Complete();

    /// <summary>Reads one response (a 1xx included). <paramref name="noBody"/> for HEAD.</summary>
    public async Task<RawResponse> ReadResponseAsync(bool noBody = false)
    {
        var headEnd = await WaitForAsync(() => IndexOf("\r\n\r\n"u8));
        var head = Encoding.Latin1.GetString(_received.GetRange(0, headEnd).ToArray());
        _received.RemoveRange(0, headEnd + 4);
        var lines = head.Split("\r\n");
        var statusParts = lines[0].Split(' ', 3);
        Assert.Equal("HTTP/1.1", statusParts[0]);
        var status = int.Parse(statusParts[1]);
        var headers = lines.Skip(1).Select(ParseField).ToList();
        var response = new RawResponse(status, statusParts.Length > 2 ? statusParts[2] : "", headers, "", new());
        if (noBody || status < 200 || status == 204 || status == 304)
        {
            return response;
        }
        if (response.Header("Transfer-Encoding") is "chunked")
        {
            var body = new StringBuilder();
            while (true)
            {
                var lineEnd = await WaitForAsync(() => IndexOf("\r\n"u8));
                var size = Convert.ToInt32(Encoding.ASCII.GetString(_received.GetRange(0, lineEnd).ToArray()), 16);
                _received.RemoveRange(0, lineEnd + 2);
                if (size == 0)
                {
                    while (true)
                    {
                        var end = await WaitForAsync(() => IndexOf("\r\n"u8));
                        var line = Encoding.Latin1.GetString(_received.GetRange(0, end).ToArray());
                        _received.RemoveRange(0, end + 2);
                        if (line.Length == 0)
                        {
                            return response with { Body = body.ToString() };
                        }
                        response.Trailers.Add(ParseField(line));
                    }
                }
                await WaitForAsync(() => _received.Count >= size + 2 ? 0 : -1);
                body.Append(Encoding.Latin1.GetString(_received.GetRange(0, size).ToArray()));
                Assert.Equal("\r\n", Encoding.ASCII.GetString(_received.GetRange(size, 2).ToArray()));
                _received.RemoveRange(0, size + 2);
            }
        }
        if (response.Header("Content-Length") is { } cl)
        {
            var length = int.Parse(cl);
            await WaitForAsync(() => _received.Count >= length ? 0 : -1);
            var body = Encoding.Latin1.GetString(_received.GetRange(0, length).ToArray());
            _received.RemoveRange(0, length);
            return response with { Body = body };
        }
        // Close-delimited.
        return response with { Body = await ReadToEndAsync() };
    }

    /// <summary>Reads until the server completes its output; returns what was left.</summary>
    public async Task<string> ReadToEndAsync()
    {
        await WaitForAsync(() => _serverOutputDone ? 0 : -1);
        var rest = Encoding.Latin1.GetString(_received.ToArray());
        _received.Clear();
        return rest;
    }

    /// <summary>Reads the first chunk of a chunked body whose size line and data are both available.</summary>
    public async Task<string> ReadChunkAsync()
    {
        var lineEnd = await WaitForAsync(() => IndexOf("\r\n"u8));
        var size = Convert.ToInt32(Encoding.ASCII.GetString(_received.GetRange(0, lineEnd).ToArray()), 16);
        await WaitForAsync(() => _received.Count >= lineEnd + 2 + size + 2 ? 0 : -1);
        var data = Encoding.Latin1.GetString(_received.GetRange(lineEnd + 2, size).ToArray());
        _received.RemoveRange(0, lineEnd + 2 + size + 2);
        return data;
    }

    public async Task<bool> IsServerOutputCompleteAsync()
    {
        await ReadToEndAsync();
        return _serverOutputDone;
    }

    private async Task<int> WaitForAsync(Func<int> probe)
    {
        while (true)
        {
            var index = probe();
            if (index >= 0)
            {
                return index;
            }
            if (_serverOutputDone)
            {
                throw new InvalidOperationException("Server closed before the expected bytes arrived. Received: " + Encoding.Latin1.GetString(_received.ToArray()));
            }
            var result = await ToClient.Reader.ReadAsync().AsTask().WaitAsync(Guard);
            foreach (var segment in result.Buffer)
            {
                _received.AddRange(segment.ToArray());
            }
            ToClient.Reader.AdvanceTo(result.Buffer.End);
            _serverOutputDone = result.IsCompleted;
        }
    }

    private int IndexOf(ReadOnlySpan<byte> needle) => _received.Count == 0 ? -1 : System.MemoryExtensions.IndexOf(System.Runtime.InteropServices.CollectionsMarshal.AsSpan(_received), needle);

    private static (string, string) ParseField(string line)
    {
        var colon = line.IndexOf(':');
        return (line[..colon], line[(colon + 1)..].Trim());
    }

    public async ValueTask DisposeAsync()
    {
        Connection.Abort();
        try
        {
            await Processing.WaitAsync(Guard);
        }
        catch (Exception)
        {
            // The test already asserted what it wanted; teardown must not mask it.
        }
    }

    private sealed class DuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
    {
        public PipeReader Input => input;
        public PipeWriter Output => output;
    }

    private sealed class DelegateHandler(Func<HttpExchange, Task> handler) : IHttpRequestHandler
    {
        public Task HandleAsync(HttpExchange exchange) => handler(exchange);
    }
}

internal static class ExchangeExtensions
{
    public static async Task WriteAsync(this HttpExchange exchange, string text)
    {
        await exchange.ResponseBody.WriteAsync(Encoding.Latin1.GetBytes(text));
    }

    public static async Task<string> ReadBodyAsync(this HttpExchange exchange)
    {
        var sb = new StringBuilder();
        while (true)
        {
            var result = await exchange.RequestBody.ReadAsync();
            foreach (var segment in result.Buffer)
            {
                sb.Append(Encoding.Latin1.GetString(segment.Span));
            }
            exchange.RequestBody.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                return sb.ToString();
            }
        }
    }
}
