using Microsoft.AspNetCore.Http.Features;
using Proxy.Server.Internal;

namespace Proxy.Server.Features;

/// <summary>The response side: status, headers, body, trailers, reset, and the start/complete sequence.</summary>
internal partial class RequestFeatures :
    IHttpResponseFeature,
    IHttpResponseBodyFeature,
    IHttpResponseTrailersFeature,
    IHttpResetFeature
{
    private readonly ProxyServerOptions _options;
    private readonly DateHeaderCache _dateCache;
    private readonly HeaderDictionary _responseHeaders;
    private readonly ResponseBodyWriter _bodyWriter;
    private IHeaderDictionary? _responseTrailers;
    private Stream? _responseStream;
    private Stream? _responseBodyOverride;
    private Stack<KeyValuePair<Func<object, Task>, object>>? _onStarting;
    private Stack<KeyValuePair<Func<object, Task>, object>>? _onCompleted;
    private bool _starting;
    private bool _responseCompleted;

    /// <summary>The response side of <see cref="ResetForNextRequest"/>.</summary>
    private void ResetResponse()
    {
        _responseHeaders.IsReadOnly = false;
        _responseHeaders.Clear();
        _responseTrailers = null;
        _responseBodyOverride = null;
        _onStarting?.Clear();
        _onCompleted?.Clear();
        _starting = false;
        _responseCompleted = false;
        HasStarted = false;
        _bodyWriter.Reset();
    }

    // ---- IHttpResponseFeature ----
    public int StatusCode
    {
        get => Exchange.StatusCode;
        set
        {
            ThrowIfStarted(nameof(StatusCode));
            Exchange.StatusCode = value;
        }
    }

    public string? ReasonPhrase
    {
        get => Exchange.ReasonPhrase;
        set
        {
            ThrowIfStarted(nameof(ReasonPhrase));
            Exchange.ReasonPhrase = value;
        }
    }

    IHeaderDictionary IHttpResponseFeature.Headers
    {
        get => _responseHeaders;
        set => throw new NotSupportedException("Replacing the response header dictionary is not supported.");
    }

    Stream IHttpResponseFeature.Body
    {
        get => _responseBodyOverride ?? ((IHttpResponseBodyFeature)this).Stream;
        set => _responseBodyOverride = value;
    }

    /// <summary>True once OnStarting callbacks ran and the headers were handed to the exchange.</summary>
    public bool HasStarted { get; private set; }

    public void OnStarting(Func<object, Task> callback, object state)
    {
        if (HasStarted || _starting)
        {
            throw new InvalidOperationException("OnStarting cannot be registered after the response has started.");
        }
        (_onStarting ??= new()).Push(new(callback, state));
    }

    public void OnCompleted(Func<object, Task> callback, object state)
        => (_onCompleted ??= new()).Push(new(callback, state));

    // ---- IHttpResponseBodyFeature ----
    // The wrapper keeps no state of its own (leaveOpen: disposing it does not complete the writer), so it is reused.
    Stream IHttpResponseBodyFeature.Stream => _responseStream ??= _bodyWriter.AsStream(leaveOpen: true);

    PipeWriter IHttpResponseBodyFeature.Writer => _bodyWriter;

    /// <summary>Nothing to disable: the engine hands bytes to the wire on every flush.</summary>
    public void DisableBuffering()
    {
    }

    public Task StartAsync(CancellationToken cancellationToken = default) => StartResponseAsync(cancellationToken).AsTask();

    /// <summary>
    /// Validates the range, starts the response (OnStarting, headers) and hands the open file to the exchange, which
    /// sends it without ASP.NET's SendFileFallback copy through a 16 KiB buffer (one async read, one copy and one flush
    /// per 16 KiB: 5-10% of the server's time on a 10 MB static file). HTTP/1.1 reads the file into the connection's
    /// output; HTTP/2's writer loop reads it into DATA frames (see <see cref="HttpExchange.SendFileAsync"/>).
    /// </summary>
    public async Task SendFileAsync(string path, long offset, long? count, CancellationToken cancellationToken = default)
    {
        using var file = File.OpenHandle(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite, FileOptions.SequentialScan);
        var length = RandomAccess.GetLength(file);
        ArgumentOutOfRangeException.ThrowIfNegative(offset);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(offset, length);
        if (count is { } n)
        {
            ArgumentOutOfRangeException.ThrowIfNegative(n, nameof(count));
            ArgumentOutOfRangeException.ThrowIfGreaterThan(n, length - offset, nameof(count));
        }
        cancellationToken.ThrowIfCancellationRequested();
        _bodyWriter.ThrowIfCompleted();
        await StartResponseAsync(cancellationToken).ConfigureAwait(false);
        await Exchange.SendFileAsync(file, offset, count ?? length - offset, cancellationToken).ConfigureAwait(false);
    }

    Task IHttpResponseBodyFeature.CompleteAsync() => CompleteResponseAsync().AsTask();

    // ---- IHttpResponseTrailersFeature ----
    IHeaderDictionary IHttpResponseTrailersFeature.Trailers
    {
        get => _responseTrailers ??= new HeaderDictionary();
        set => _responseTrailers = value;
    }

    // ---- IHttpResetFeature (HTTP/2 only) ----
    public void Reset(int errorCode)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(errorCode);
        Exchange.Abort((uint)errorCode);
    }

    /// <summary>
    /// Starts the response once: runs OnStarting callbacks (last registered first, as Kestrel
    /// does), freezes and copies the headers, adds Date/Server, then hands the head to the exchange (HTTP/2 schedules
    /// its HEADERS frame at once; HTTP/1.1 commits it to the output, where the next flush sends it).
    /// </summary>
    internal ValueTask StartResponseAsync(CancellationToken cancellationToken = default) => StartResponseAsync(send: true, cancellationToken);

    /// <summary>
    /// Starts the response once. <paramref name="send"/> false: the exchange is not told here; the head reaches it with
    /// the first body byte or the completion the caller makes next.
    /// </summary>
    // NOTE: for a response finished in one go that saves HTTP/2's writer loop a wake for the HEADERS alone, and lets
    // HTTP/1.1 frame an empty body with Content-Length: 0 at completion instead of committing to chunked first.
    internal async ValueTask StartResponseAsync(bool send, CancellationToken cancellationToken = default)
    {
        if (HasStarted)
        {
            return;
        }
        if (!_starting)
        {
            _starting = true;
            if (_onStarting is { } callbacks)
            {
                while (callbacks.TryPop(out var entry))
                {
                    await entry.Key(entry.Value).ConfigureAwait(false);
                }
            }
        }
        CopyResponseHeaders();
        HasStarted = true;
        _responseHeaders.IsReadOnly = true;
        if (send)
        {
            await Exchange.StartResponseAsync(cancellationToken).ConfigureAwait(false);
        }
        _bodyWriter.MoveBufferedBytes();
    }

    /// <summary>Ends the response (idempotent): start if needed, trailers, then the exchange's completion.</summary>
    internal async ValueTask CompleteResponseAsync()
    {
        if (_responseCompleted)
        {
            return;
        }
        _responseCompleted = true;
        if (!HasStarted && !_starting)
        {
            // The whole body is known: announce its length rather than chunking (HTTP/1.1) or
            // leaving the client to wait for END_STREAM to know it. NOTE: not when trailers follow (a gRPC reply):
            // a client that trusts the length stops reading at the last byte and misses them (HttpClient did).
            var buffered = _bodyWriter.BufferedLength;
            if (buffered > 0 && _responseHeaders.ContentLength is null && !HttpMethods.IsHead(Method)
                && !_responseHeaders.ContainsKey("Transfer-Encoding") && _responseTrailers is not { Count: > 0 })
            {
                _responseHeaders.ContentLength = buffered;
            }
        }
        await StartResponseAsync(send: false).ConfigureAwait(false);
        CopyTrailers();
        await Exchange.CompleteAsync().ConfigureAwait(false);
    }

    /// <summary>
    /// The app threw. Before the response started: replace it with an empty 500 (or the status
    /// of a BadHttpRequestException). After: the client already has part of a response, so the
    /// only honest signal left is to abort (RST_STREAM INTERNAL_ERROR for HTTP/2).
    /// </summary>
    internal async ValueTask OnApplicationErrorAsync(Exception exception)
    {
        if (HasStarted || _starting || _responseCompleted)
        {
            Exchange.Abort(InternalError);
            return;
        }
        _bodyWriter.DiscardBufferedBytes();
        _responseHeaders.Clear();
        Exchange.StatusCode = exception is BadHttpRequestException bad ? bad.StatusCode : StatusCodes.Status500InternalServerError;
        Exchange.ReasonPhrase = null;
        _responseHeaders.ContentLength = 0;
        _responseTrailers = null;
        try
        {
            await CompleteResponseAsync().ConfigureAwait(false);
        }
        catch (Exception) when (!Exchange.HasResponseStarted)
        {
            Exchange.Abort(InternalError);
            throw;
        }
    }

    /// <summary>Runs OnCompleted callbacks (last registered first); returns the first failure, if any.</summary>
    internal async ValueTask<Exception?> FireOnCompletedAsync()
    {
        Exception? first = null;
        if (_onCompleted is { } callbacks)
        {
            while (callbacks.TryPop(out var entry))
            {
                try
                {
                    await entry.Key(entry.Value).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    first ??= e;
                }
            }
        }
        return first;
    }

    private void CopyResponseHeaders()
    {
        var target = Exchange.ResponseHeaders;
        foreach (var (name, values) in _responseHeaders)
        {
            // RFC 9113 §8.2.2: connection-specific fields MUST NOT appear in HTTP/2 messages.
            if (IsHttp2 && HttpFieldRules.IsConnectionSpecificIgnoreCase(name))
            {
                continue;
            }
            var wireName = IsHttp2 ? name.ToLowerInvariant() : name; // RFC 9113 §8.2: lowercase names.
            foreach (var value in values)
            {
                target.Add(wireName, value ?? "");
            }
        }
        if (!_responseHeaders.ContainsKey("Date"))
        {
            target.Add(IsHttp2 ? "date" : "Date", _dateCache.GetValue());
        }
        if (_options.AddServerHeader && !_responseHeaders.ContainsKey("Server"))
        {
            target.Add(IsHttp2 ? "server" : "Server", "proxy");
        }
    }

    private void CopyTrailers()
    {
        if (_responseTrailers is not { Count: > 0 } trailers || !Exchange.SupportsTrailers)
        {
            return;
        }
        foreach (var (name, values) in trailers)
        {
            var wireName = IsHttp2 ? name.ToLowerInvariant() : name;
            foreach (var value in values)
            {
                Exchange.ResponseTrailers.Add(wireName, value ?? "");
            }
        }
    }

    private void ThrowIfStarted(string what)
    {
        if (HasStarted)
        {
            throw new InvalidOperationException($"{what} cannot be set after the response has started.");
        }
    }
}
