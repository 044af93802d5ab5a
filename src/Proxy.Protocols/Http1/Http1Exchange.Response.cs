using System.Diagnostics;
using System.Globalization;
using Proxy.Codecs.Http1;

namespace Proxy.Protocols.Http1;

internal sealed partial class Http1Exchange
{
    /// <summary>How the response body is delimited (RFC 9112 §6.3 from the client's side).</summary>
    private enum BodyMode : byte
    {
        /// <summary>HEAD, 204, 304: no content; writes are dropped.</summary>
        NoBody,
        ContentLength,
        Chunked,
        /// <summary>HTTP/1.0 without Content-Length: the body ends when the connection closes.</summary>
        CloseDelimited,
    }

    // Room reserved around a chunk: up to 8 hex digits + CRLF before, CRLF after.
    private const int MaxChunkOverhead = 8 + 2 + 2;

    private readonly Http1ResponseBody _responseBody;
    private bool _started;
    private bool _continueSent;
    // Only requests that expect a 100 take it: the 100's write against the head's (see SendContinueIfExpectedAsync).
    private readonly Lock _continueLock = new();
    // A 100 Continue's flush still waiting for the transport, which the next response flush waits for first.
    private Task<FlushResult>? _continueFlush;
    private BodyMode _mode;
    private long _declaredLength = -1;
    private long _written;
    private Memory<byte> _chunkMemory;
    private int _chunkPrefix;
    private byte[]? _discardBuffer;
    private Task? _completeTask;

    public override PipeWriter ResponseBody => _responseBody;

    public override bool HasResponseStarted => _started;

    /// <summary>RFC 9110 §6.5.1: trailers only in a chunked HTTP/1.1 response to a client that sent "TE: trailers".</summary>
    public override bool SupportsTrailers => Head.Version == Http1Version.Http11 && Head.AcceptsTrailers;

    /// <summary>Whether the connection may carry the next request once this response is complete.</summary>
    public bool KeepAlive { get; private set; }

    /// <summary>True when the response ended short of its declared Content-Length (the connection must close).</summary>
    public bool ResponseIncomplete { get; private set; }


    /// <summary>The response side of <see cref="Reset"/>.</summary>
    private void ResetResponse()
    {
        _started = false;
        _continueSent = false;
        _continueFlush = null;
        _mode = BodyMode.NoBody;
        _declaredLength = -1;
        _written = 0;
        _chunkMemory = default;
        _chunkPrefix = 0;
        _completeTask = null;
        KeepAlive = false;
        ResponseIncomplete = false;
    }

    /// <summary>
    /// Commits the head into the connection's output; the next flush or the completion sends it with what follows
    /// (Kestrel's HTTP/1.1 StartAsync does the same). Flushing here cost a second socket write for every response an
    /// app starts before writing (HttpResponse.WriteAsync(string) starts first, then writes).
    /// </summary>
    public override ValueTask StartResponseAsync(CancellationToken cancellationToken = default)
    {
        cancellationToken.ThrowIfCancellationRequested();
        WriteHead(finalizing: false);
        return ValueTask.CompletedTask;
    }

    public override ValueTask CompleteAsync()
    {
        _completeTask ??= CompleteCoreAsync();
        return new ValueTask(_completeTask);
    }

    /// <summary>Replaces a response that never started (handler failure, invalid headers) with an empty <paramref name="status"/>.</summary>
    internal ValueTask CompleteWithStatusAsync(int status)
    {
        if (_started)
        {
            throw new InvalidOperationException("The response has already started.");
        }
        ResponseHeaders.Clear();
        ResponseTrailers.Clear();
        ReasonPhrase = null;
        StatusCode = status;
        _completeTask = null;
        return CompleteAsync();
    }

    private async Task CompleteCoreAsync()
    {
        if (_connection.IsAborted)
        {
            // Aborted (by the app, e.g. a proxy whose backend broke mid-body, or by the client):
            // a last-chunk now would tell the client the truncated body is complete. Say nothing;
            // the connection closes.
            ResponseIncomplete = true;
            KeepAlive = false;
            return;
        }
        WriteHead(finalizing: true);
        if (_mode == BodyMode.Chunked)
        {
            // RFC 9112 §7.1: last-chunk, then the trailer section and the final CRLF.
            if (SupportsTrailers && ResponseTrailers.Count > 0)
            {
                WriteTrailerSection();
            }
            else
            {
                // The common case: no trailers, a constant last-chunk (no builder, no string).
                _connection.Output.Write("0\r\n\r\n"u8);
            }
        }
        else if (_mode == BodyMode.ContentLength && _written < _declaredLength)
        {
            // The client would wait forever for the missing bytes: close instead.
            ResponseIncomplete = true;
            KeepAlive = false;
        }
        await FlushOutputAsync(default).ConfigureAwait(false);
    }

    /// <remarks>
    /// NOTE: the body's reader calls this, and a proxy reads the body in one flow while it writes the response in
    /// another, so the 100 and the response head could be written into the transport at once. The 100 is written and
    /// its flush started under <see cref="_continueLock"/>, which the head's writer takes too when the request expects
    /// a 100; a response flush waits for a 100's flush still under way (<see cref="_continueFlush"/>): a transport's
    /// writer takes one writer and one flush at a time.
    /// </remarks>
    internal async ValueTask SendContinueIfExpectedAsync(CancellationToken cancellationToken)
    {
        if (!Head.ExpectContinue)
        {
            return;
        }
        ValueTask<FlushResult> flush;
        Task<FlushResult>? pending = null;
        lock (_continueLock)
        {
            if (_continueSent || _started)
            {
                return;
            }
            _continueSent = true;
            _connection.Output.Write("HTTP/1.1 100 Continue\r\n\r\n"u8);
            flush = _connection.Output.FlushAsync(cancellationToken);
            if (!flush.IsCompleted)
            {
                _continueFlush = pending = flush.AsTask();
            }
        }
        var result = pending is null ? flush.GetAwaiter().GetResult() : await pending.ConfigureAwait(false);
        if (result.IsCompleted)
        {
            OnClientDisconnected();
        }
    }

    /// <summary>
    /// A 16 KiB output block less a chunk's framing: the connection output pools of our transports hand out 16 KiB blocks
    /// (<c>BlockMemoryPool.Default</c>, <c>TlsOutputDefault</c>), and in chunked mode a body write asks for its hint plus
    /// <see cref="MaxChunkOverhead"/>.
    /// </summary>
    public override int ResponseBodyBlockSize => 16 * 1024 - MaxChunkOverhead;

    internal Memory<byte> GetBodyMemory(int sizeHint)
    {
        ThrowIfCompleted();
        WriteHead(finalizing: false);
        switch (_mode)
        {
            case BodyMode.NoBody:
                var size = Math.Max(sizeHint, 4096);
                if (_discardBuffer is null || _discardBuffer.Length < size)
                {
                    _discardBuffer = new byte[size];
                }
                return _discardBuffer;
            case BodyMode.Chunked:
                var memory = _connection.Output.GetMemory(Math.Max(sizeHint, 1) + MaxChunkOverhead);
                // Leading zeros are allowed in chunk-size (1*HEXDIG), so the prefix width can be
                // fixed before we know how many bytes the app will write.
                var digits = HexDigitCount(memory.Length);
                _chunkPrefix = digits + 2;
                _chunkMemory = memory;
                return memory.Slice(_chunkPrefix, memory.Length - _chunkPrefix - 2);
            default:
                return _connection.Output.GetMemory(sizeHint);
        }
    }

    internal void AdvanceBody(int bytes)
    {
        ThrowIfCompleted();
        ArgumentOutOfRangeException.ThrowIfNegative(bytes);
        switch (_mode)
        {
            case BodyMode.NoBody:
                return;
            case BodyMode.ContentLength:
                if (_written + bytes > _declaredLength)
                {
                    throw new InvalidOperationException(
                        $"Response Content-Length mismatch: too many bytes written ({_written + bytes} of {_declaredLength}).");
                }
                _connection.Output.Advance(bytes);
                break;
            case BodyMode.Chunked:
                if (bytes == 0)
                {
                    // A zero-size chunk would end the body.
                    return;
                }
                var span = _chunkMemory.Span;
                var digits = _chunkPrefix - 2;
                var value = bytes;
                for (var i = digits - 1; i >= 0; i--)
                {
                    span[i] = (byte)"0123456789abcdef"[value & 0xF];
                    value >>= 4;
                }
                span[digits] = (byte)'\r';
                span[digits + 1] = (byte)'\n';
                span[_chunkPrefix + bytes] = (byte)'\r';
                span[_chunkPrefix + bytes + 1] = (byte)'\n';
                _connection.Output.Advance(_chunkPrefix + bytes + 2);
                _chunkMemory = default;
                break;
            default:
                _connection.Output.Advance(bytes);
                break;
        }
        _written += bytes;
    }

    internal ValueTask<FlushResult> FlushBodyAsync(CancellationToken cancellationToken)
    {
        WriteHead(finalizing: false);
        return FlushOutputAsync(cancellationToken);
    }

    internal void CancelPendingFlush() => _connection.Output.CancelPendingFlush();

    private async ValueTask<FlushResult> FlushOutputAsync(CancellationToken cancellationToken)
    {
        if (_continueFlush is { } continueFlush)
        {
            // Set under the lock the head's writer took before any response flush (see SendContinueIfExpectedAsync).
            _continueFlush = null;
            try
            {
                await continueFlush.ConfigureAwait(false);
            }
            catch (Exception)
            {
                // Its own reader saw the failure (a cancelled read, a gone client); this flush reports its own outcome.
            }
        }
        var result = await _connection.Output.FlushAsync(cancellationToken).ConfigureAwait(false);
        if (result.IsCompleted)
        {
            // The transport's reader is gone: the client cannot receive anything more.
            OnClientDisconnected();
        }
        return result;
    }

    private void ThrowIfCompleted()
    {
        if (_completeTask is not null)
        {
            throw new InvalidOperationException("The response has completed.");
        }
    }

    /// <summary>Decides the framing and writes the status line and header section into the transport output.</summary>
    private void WriteHead(bool finalizing)
    {
        if (_started)
        {
            return;
        }
        if (Head.ExpectContinue)
        {
            // The body's reader may be writing a 100 Continue (see SendContinueIfExpectedAsync).
            lock (_continueLock)
            {
                WriteHeadCore(finalizing);
            }
            return;
        }
        WriteHeadCore(finalizing);
    }

    private void WriteHeadCore(bool finalizing)
    {
        if (_started)
        {
            return;
        }
        var status = StatusCode;
        if (status < 200 || status > 999)
        {
            throw new InvalidOperationException($"Status code {status} cannot be sent as a final response.");
        }
        // Validation first (every field, framing ones included), so a bad header leaves nothing half-written.
        var fields = Http1HeadWriter.Scan(ResponseHeaders);
        var reason = ReasonPhrase;
        var statusLineLength = Http1HeadWriter.MeasureStatusLine(status, reason, out var statusLine);
        var declared = ParseDeclaredLength(fields.ContentLength);
        var appWantsClose = Http1HeadWriter.HasToken(fields.Connection, "close");

        // Step 1: framing. RFC 9110 §6.4.1: HEAD, 204 and 304 responses have no content.
        var isHead = Method == "HEAD";
        var mode = status == 204 || status == 304 || isHead ? BodyMode.NoBody
            : declared >= 0 ? BodyMode.ContentLength
            : finalizing ? BodyMode.ContentLength
            : Head.Version == Http1Version.Http11 ? BodyMode.Chunked
            : BodyMode.CloseDelimited;
        var addContentLength = mode == BodyMode.ContentLength && declared < 0;
        if (addContentLength)
        {
            declared = 0;
        }

        // Step 2: persistence (RFC 9112 §9.3, §9.6). A body the client held back behind
        // "Expect: 100-continue" that we never asked for cannot be skipped safely: close.
        // (A request without a body has nothing held back.)
        var unreadContinue = Head.ExpectContinue && !_continueSent && _body is { PumpStarted: false };
        var keepAlive = Head.KeepAlive && !appWantsClose && mode != BodyMode.CloseDelimited && !unreadContinue && !_connection.IsAborted;

        // Step 3: serialise into one span of the exact size.
        // RFC 9110 §8.6: a server MUST NOT send Content-Length in a 204 response.
        var skipContentLength = status == 204 || addContentLength;
        ReadOnlySpan<byte> persistence = !keepAlive ? "Connection: close\r\n"u8
            : Head.Version == Http1Version.Http10 ? "Connection: keep-alive\r\n"u8
            : default;
        var length = statusLineLength + fields.Length + (skipContentLength ? 0 : fields.ContentLengthFieldsLength)
            + (addContentLength ? "Content-Length: 0\r\n"u8.Length : 0)
            + (mode == BodyMode.Chunked ? "Transfer-Encoding: chunked\r\n"u8.Length : 0)
            + persistence.Length + 2;
        var output = _connection.Output;
        var span = output.GetSpan(length);
        var at = Http1HeadWriter.WriteStatusLine(span, status, reason, statusLine);
        at += Http1HeadWriter.WriteFields(span[at..], ResponseHeaders, skipContentLength);
        if (addContentLength)
        {
            at += Copy("Content-Length: 0\r\n"u8, span[at..]);
        }
        if (mode == BodyMode.Chunked)
        {
            at += Copy("Transfer-Encoding: chunked\r\n"u8, span[at..]);
        }
        at += Copy(persistence, span[at..]);
        span[at++] = (byte)'\r';
        span[at++] = (byte)'\n';
        Debug.Assert(at == length, "The head was measured wrong.");

        _mode = mode;
        _declaredLength = declared;
        KeepAlive = keepAlive;
        _started = true;
        output.Advance(at);
    }

    private static int Copy(ReadOnlySpan<byte> source, Span<byte> destination)
    {
        source.CopyTo(destination);
        return source.Length;
    }

    /// <summary>RFC 9112 §7.1: last-chunk, the trailer fields (framing ones left out) and the final CRLF.</summary>
    private void WriteTrailerSection()
    {
        var fields = Http1HeadWriter.Scan(ResponseTrailers);
        var length = 3 + fields.Length + fields.ContentLengthFieldsLength + 2;
        var span = _connection.Output.GetSpan(length);
        var at = Copy("0\r\n"u8, span);
        at += Http1HeadWriter.WriteFields(span[at..], ResponseTrailers, skipContentLength: false);
        span[at++] = (byte)'\r';
        span[at++] = (byte)'\n';
        _connection.Output.Advance(at);
    }

    private static long ParseDeclaredLength(string? value)
    {
        if (value is null)
        {
            return -1;
        }
        if (!long.TryParse(value, NumberStyles.None, CultureInfo.InvariantCulture, out var length))
        {
            throw new InvalidOperationException($"Invalid response Content-Length '{value}'.");
        }
        return length;
    }

    private static int HexDigitCount(int value)
    {
        var digits = 1;
        while ((value >>= 4) != 0)
        {
            digits++;
        }
        return digits;
    }
}
