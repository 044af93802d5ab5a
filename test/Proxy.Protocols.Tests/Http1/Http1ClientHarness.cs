using System.Buffers;
using System.IO.Pipelines;
using System.Text;
using Proxy.Protocols.Client;
using Proxy.Protocols.Http1.Client;

namespace Proxy.Protocols.Tests.Http1;

/// <summary>
/// Drives an <see cref="Http1ClientConnection"/> over two in-memory pipes: the test plays the backend, reading the
/// request bytes the client wrote and writing raw response bytes.
/// </summary>
// Owned by one test.
internal sealed class Http1ClientHarness : IAsyncDisposable
{
    public static readonly TimeSpan Guard = TimeSpan.FromSeconds(10);

    public Http1ClientHarness(Http1ClientOptions? options = null)
    {
        Connection = new Http1ClientConnection(new TestDuplexPipe(ToClient.Reader, ToBackend.Writer), options);
        Connection.ExchangeReleased += (_, reusable) => Released.Add(reusable);
    }

    /// <summary>Request bytes, client to backend.</summary>
    public Pipe ToBackend { get; } = new();

    /// <summary>Response bytes, backend to client.</summary>
    public Pipe ToClient { get; } = new();

    public Http1ClientConnection Connection { get; }

    /// <summary>The reusable flag of every ExchangeReleased event, in order.</summary>
    public List<bool> Released { get; } = new();

    public static BackendRequest Get(string path = "/", string authority = "backend.example") =>
        new() { Method = "GET", Authority = authority, PathAndQuery = path };

    public async Task<BackendExchange> SendAsync(BackendRequest request) =>
        await Connection.SendAsync(request).AsTask().WaitAsync(Guard);

    /// <summary>Everything the client flushed so far (empty when nothing), consumed.</summary>
    public string TakeWritten()
    {
        if (!ToBackend.Reader.TryRead(out var result))
        {
            return "";
        }
        var text = Encoding.Latin1.GetString(result.Buffer.ToArray());
        ToBackend.Reader.AdvanceTo(result.Buffer.End);
        return text;
    }

    /// <summary>Waits until the request bytes end with <paramref name="suffix"/> and returns them all, consumed.</summary>
    public async Task<string> ReadWrittenUntilAsync(string suffix)
    {
        var reader = ToBackend.Reader;
        while (true)
        {
            var result = await reader.ReadAsync().AsTask().WaitAsync(Guard);
            var text = Encoding.Latin1.GetString(result.Buffer.ToArray());
            if (text.EndsWith(suffix, StringComparison.Ordinal) || result.IsCompleted)
            {
                reader.AdvanceTo(result.Buffer.End);
                return text;
            }
            reader.AdvanceTo(result.Buffer.Start, result.Buffer.End);
        }
    }

    public async Task RespondAsync(string text) =>
        await ToClient.Writer.WriteAsync(Encoding.Latin1.GetBytes(text)).AsTask().WaitAsync(Guard);

    public void CloseBackend() => ToClient.Writer.Complete();

    /// <summary>Reads a body to its end, consuming everything each time.</summary>
    public static async Task<string> ReadToEndAsync(PipeReader reader)
    {
        var text = new StringBuilder();
        while (true)
        {
            var result = await reader.ReadAsync().AsTask().WaitAsync(Guard);
            text.Append(Encoding.Latin1.GetString(result.Buffer.ToArray()));
            reader.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                return text.ToString();
            }
        }
    }

    public ValueTask DisposeAsync() => Connection.DisposeAsync();

    private sealed class TestDuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
    {
        public PipeReader Input => input;
        public PipeWriter Output => output;
    }
}
