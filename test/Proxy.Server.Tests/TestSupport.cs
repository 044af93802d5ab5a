using System.IO.Pipelines;
using System.Threading.Channels;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Protocols;
using Proxy.Protocols.Http1;
using Proxy.Protocols.Http2;
using Proxy.Server.Internal;

namespace Proxy.Server.Tests;

/// <summary>
/// An exchange as an engine would present it, recording what the server does to it.
/// Like the real engines, its body writer starts the response implicitly on the first flush;
/// the test can then check that the server had started it explicitly first.
/// </summary>
internal sealed class FakeExchange : HttpExchange
{
    private readonly Pipe _requestBody = new();
    private readonly Pipe _responseBody = new(new PipeOptions(pauseWriterThreshold: 0));
    private readonly CancellationTokenSource _aborted = new();
    private readonly RecordingWriter _writer;
    private bool _started;

    public FakeExchange(string method = "GET", string target = "/", string protocol = "HTTP/1.1", string scheme = "http",
        string authority = "", bool hasBody = false, long? contentLength = null)
    {
        Method = method;
        RawTarget = target;
        Protocol = protocol;
        Scheme = scheme;
        Authority = authority;
        RequestHasBody = hasBody;
        RequestContentLength = contentLength;
        _writer = new RecordingWriter(this, _responseBody.Writer);
        if (!hasBody)
        {
            _requestBody.Writer.Complete();
        }
    }

    public static ConnectionMetadata Plain() => new()
    {
        ConnectionId = "conn1",
        LocalEndPoint = new System.Net.IPEndPoint(System.Net.IPAddress.Loopback, 5000),
        RemoteEndPoint = new System.Net.IPEndPoint(System.Net.IPAddress.Parse("10.1.2.3"), 40000),
    };

    public PipeWriter RequestBodyWriter => _requestBody.Writer;
    public override PipeReader RequestBody => _requestBody.Reader;
    public override CancellationToken RequestAborted => _aborted.Token;
    public override bool SupportsTrailers => Protocol == "HTTP/2";
    public override bool HasResponseStarted => _started;
    public override PipeWriter ResponseBody => _writer;

    public List<KeyValuePair<string, string>>? HeadersAtStart { get; private set; }
    public int? StatusAtStart { get; private set; }
    public int StartCalls { get; private set; }
    public bool BodyFlushedBeforeStart { get; private set; }
    public int CompleteCalls { get; private set; }
    public uint? AbortCode { get; private set; }

    public void AddRequestHeader(string name, string value) => RequestHeaders.Add(name, value);

    public override ValueTask StartResponseAsync(CancellationToken cancellationToken = default)
    {
        StartCalls++;
        MarkStarted();
        return default;
    }

    public override async ValueTask CompleteAsync()
    {
        CompleteCalls++;
        MarkStarted();
        await _responseBody.Writer.CompleteAsync();
    }

    public override void Abort(uint errorCode)
    {
        AbortCode ??= errorCode;
        _aborted.Cancel();
        _responseBody.Writer.Complete(new IOException("aborted"));
    }

    /// <summary>The response body bytes, once the response completed.</summary>
    public async Task<byte[]> ReadResponseBodyAsync()
    {
        var stream = new MemoryStream();
        await _responseBody.Reader.CopyToAsync(stream);
        return stream.ToArray();
    }

    private void MarkStarted()
    {
        if (!_started)
        {
            _started = true;
            HeadersAtStart = [.. ResponseHeaders];
            StatusAtStart = StatusCode;
        }
    }

    private sealed class RecordingWriter(FakeExchange owner, PipeWriter inner) : PipeWriter
    {
        public override void Advance(int bytes) => inner.Advance(bytes);
        public override Memory<byte> GetMemory(int sizeHint = 0) => inner.GetMemory(sizeHint);
        public override Span<byte> GetSpan(int sizeHint = 0) => inner.GetSpan(sizeHint);
        public override void CancelPendingFlush() => inner.CancelPendingFlush();
        public override void Complete(Exception? exception = null) => inner.Complete(exception);

        public override ValueTask<FlushResult> FlushAsync(CancellationToken cancellationToken = default)
        {
            if (!owner._started)
            {
                owner.BodyFlushedBeforeStart = true;
                owner.MarkStarted();
            }
            return inner.FlushAsync(cancellationToken);
        }
    }
}

/// <summary>A real IHttpApplication: DefaultHttpContext over the server's features, running a RequestDelegate.</summary>
internal sealed class DelegateApplication(RequestDelegate app) : IHttpApplication<HttpContext>
{
    public Exception? DisposedWith { get; private set; }
    public bool Disposed { get; private set; }

    public HttpContext CreateContext(IFeatureCollection contextFeatures) => new DefaultHttpContext(contextFeatures);

    public Task ProcessRequestAsync(HttpContext context) => app(context);

    public void DisposeContext(HttpContext context, Exception? exception)
    {
        Disposed = true;
        DisposedWith = exception;
    }
}

/// <summary>Stands in for the engines: records which one the server chose and how it was stopped.</summary>
internal sealed class FakeProtocolFactory : IConnectionProtocolFactory
{
    public Channel<FakeProtocol> Created { get; } = Channel.CreateUnbounded<FakeProtocol>();
    public bool IgnoreShutdown { get; set; }

    public IConnectionProtocol CreateHttp1(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => Add(new FakeProtocol("HTTP/1.1", transport, metadata, handler, IgnoreShutdown));

    public IConnectionProtocol CreateHttp2(IDuplexPipe transport, Http2Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => Add(new FakeProtocol("HTTP/2", transport, metadata, handler, IgnoreShutdown));

    private FakeProtocol Add(FakeProtocol protocol)
    {
        Created.Writer.TryWrite(protocol);
        return protocol;
    }
}

internal sealed class FakeProtocol(string name, IDuplexPipe transport, ConnectionMetadata metadata, IHttpRequestHandler handler, bool ignoreShutdown) : IConnectionProtocol
{
    private readonly TaskCompletionSource _shutdown = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public string Name => name;
    public IDuplexPipe Transport => transport;
    public ConnectionMetadata Metadata => metadata;
    public IHttpRequestHandler Handler => handler;
    public bool ShutdownCalled { get; private set; }
    public bool Aborted { get; private set; }

    public async Task ProcessAsync(CancellationToken abort)
    {
        // Announce the choice to the peer, then idle until told to stop.
        await transport.Output.WriteAsync(System.Text.Encoding.ASCII.GetBytes(name + "\n"), CancellationToken.None);
        var aborted = new TaskCompletionSource();
        using (abort.Register(() => aborted.TrySetResult()))
        {
            await Task.WhenAny(_shutdown.Task, aborted.Task);
        }
        Aborted = abort.IsCancellationRequested;
        await transport.Output.CompleteAsync();
    }

    public Task ShutdownAsync()
    {
        ShutdownCalled = true;
        if (!ignoreShutdown)
        {
            _shutdown.TrySetResult();
        }
        return Task.CompletedTask;
    }
}

internal static class Patience
{
    /// <summary>A guard against hangs, not a timing assertion.</summary>
    public static readonly TimeSpan Long = TimeSpan.FromSeconds(30);
}
