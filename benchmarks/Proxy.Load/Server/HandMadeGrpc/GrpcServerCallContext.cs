using Google.Protobuf;
using Microsoft.AspNetCore.Http;

namespace Proxy.Load.Server.HandMadeGrpc;

/// <summary>
/// One gRPC call on the server: its deadline, its cancellation, its request metadata and the streams of
/// messages in both directions.
/// </summary>
// Owned by the request that runs the call (one handler at a time; not shared across calls).
public sealed class GrpcServerCallContext : IDisposable
{
    private readonly CancellationTokenSource? _deadlineSource;
    private readonly CancellationTokenSource _callSource;

    internal GrpcServerCallContext(HttpContext httpContext, TimeSpan? timeout)
    {
        HttpContext = httpContext;
        if (timeout is { } t)
        {
            Deadline = DateTimeOffset.UtcNow + t;
            _deadlineSource = new CancellationTokenSource(t);
            _callSource = CancellationTokenSource.CreateLinkedTokenSource(httpContext.RequestAborted, _deadlineSource.Token);
        }
        else
        {
            _callSource = CancellationTokenSource.CreateLinkedTokenSource(httpContext.RequestAborted);
        }
    }

    public HttpContext HttpContext { get; }

    /// <summary>When the client's grpc-timeout runs out, or null when it sent none.</summary>
    public DateTimeOffset? Deadline { get; }

    /// <summary>Cancelled when the deadline passes or the client resets the stream (RequestAborted).</summary>
    public CancellationToken CancellationToken => _callSource.Token;

    /// <summary>True once the deadline passed (as opposed to the client cancelling).</summary>
    public bool DeadlineExceeded => _deadlineSource?.IsCancellationRequested == true;

    /// <summary>True once the client went away or reset the stream.</summary>
    public bool ClientCancelled => HttpContext.RequestAborted.IsCancellationRequested;

    public IHeaderDictionary RequestHeaders => HttpContext.Request.Headers;

    /// <summary>Extra trailers sent with grpc-status (trailing metadata).</summary>
    public Dictionary<string, string> ResponseTrailers { get; } = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>
    /// Sends the response headers (with <paramref name="metadata"/>) now, before any message: a client
    /// waiting for metadata before it writes must see them without us reading anything first.
    /// </summary>
    public async Task WriteResponseHeadersAsync(IReadOnlyDictionary<string, string> metadata)
    {
        foreach (var (name, value) in metadata)
        {
            HttpContext.Response.Headers[name] = value;
        }

        await HttpContext.Response.StartAsync(CancellationToken);
        await HttpContext.Response.BodyWriter.FlushAsync(CancellationToken);
    }

    /// <summary>Reads the next request message, or null when the client finished sending.</summary>
    public ValueTask<T?> ReadMessageAsync<T>(MessageParser<T> parser) where T : class, IMessage<T> =>
        GrpcMessageFraming.ReadMessageAsync(HttpContext.Request.BodyReader, parser, CancellationToken);

    /// <summary>Every request message until the client half-closes.</summary>
    public async IAsyncEnumerable<T> ReadAllAsync<T>(MessageParser<T> parser) where T : class, IMessage<T>
    {
        while (await ReadMessageAsync(parser) is { } message)
        {
            yield return message;
        }
    }

    /// <summary>Reads the single request message of a unary or server-streaming call.</summary>
    public async Task<T> ReadSingleAsync<T>(MessageParser<T> parser) where T : class, IMessage<T>
    {
        var message = await ReadMessageAsync(parser)
            ?? throw new GrpcStatusException(GrpcStatusCode.Internal, "Expected one request message, got none.");
        if (await ReadMessageAsync(parser) is not null)
        {
            throw new GrpcStatusException(GrpcStatusCode.Internal, "Expected one request message, got more.");
        }

        return message;
    }

    /// <summary>Writes one response message and flushes it.</summary>
    public ValueTask WriteMessageAsync(IMessage message) =>
        GrpcMessageFraming.WriteMessageAsync(HttpContext.Response.BodyWriter, message, CancellationToken);

    public void Dispose()
    {
        _callSource.Dispose();
        _deadlineSource?.Dispose();
    }
}
