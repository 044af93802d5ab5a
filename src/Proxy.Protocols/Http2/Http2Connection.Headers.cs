using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

// The read loop: header blocks (HEADERS + CONTINUATION, RFC 9113 §6.2, §6.10) and opening streams.
public sealed partial class Http2Connection
{
    private enum HeaderBlockTarget
    {
        NewRequest,
        Trailers,
        /// <summary>A stream we reset: decoded only to keep the HPACK table in sync (RFC 9113 §4.3), then dropped.</summary>
        Ignore,
    }

    // ---- Owned by the read loop: the header block being received ----
    // NOTE: only a block split over CONTINUATION frames is gathered here (one with END_HEADERS is decoded in place), so
    // the buffer exists from the first such frame until the block ends: most connections never hold one, and one large
    // block does not keep its grown buffer for the connection's life (4 KiB per connection was 400 bytes per SSE stream).
    private ArrayBufferWriter<byte>? _headerBlockBuffer;
    private int _headerBlockStreamId;
    private int _headerBlockContinuations;
    private bool _headerBlockEndStream;
    private HeaderBlockTarget _headerBlockTarget;
    private Http2StreamException? _headerBlockError;

    private void ProcessHeaders(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        if (header.StreamId == 0)
        {
            throw new Http2ConnectionException("HEADERS on stream 0.", Http2ErrorCode.ProtocolError, "headers_stream_zero");
        }
        var frame = Http2FrameReader.ReadHeaders(header, payload);
        var streamId = header.StreamId;
        Http2StreamException? error = null;
        HeaderBlockTarget target;
        if (_streams.TryGetValue(streamId, out var stream))
        {
            target = HeaderBlockTarget.Trailers;
            if (!Http2StreamStateMachine.CanReceiveData(stream.State))
            {
                // RFC 9113 §5.1: half-closed (remote) — HEADERS after END_STREAM is a STREAM_CLOSED error.
                error = new Http2StreamException(streamId, "HEADERS after END_STREAM.", Http2ErrorCode.StreamClosed, "headers_after_end_stream");
            }
            else if (!frame.EndStream)
            {
                // RFC 9113 §8.1: a trailer section must end the stream, otherwise the request is malformed.
                error = new Http2StreamException(streamId, "Trailers without END_STREAM.", Http2ErrorCode.ProtocolError, "trailers_without_end_stream");
            }
        }
        else if ((streamId & 1) == 0)
        {
            // RFC 9113 §5.1.1: client streams use odd identifiers.
            throw new Http2ConnectionException("Client opened an even stream id.", Http2ErrorCode.ProtocolError, "even_stream_id");
        }
        else if (streamId <= _lastStreamId)
        {
            if (!_recentlyReset.Contains(streamId))
            {
                if (_recentlyClosed.Contains(streamId))
                {
                    // RFC 9113 §5.1 (closed): HEADERS on a stream that was open and is closed is STREAM_CLOSED.
                    throw new Http2ConnectionException("HEADERS on a closed stream.", Http2ErrorCode.StreamClosed, "headers_closed_stream");
                }
                // RFC 9113 §5.1.1: a new stream id must exceed every id the client used: "An endpoint that receives an
                // unexpected stream identifier MUST respond with a connection error of type PROTOCOL_ERROR."
                throw new Http2ConnectionException("HEADERS with a stream id lower than one already used.", Http2ErrorCode.ProtocolError, "stream_id_not_increasing");
            }
            target = HeaderBlockTarget.Ignore; // we reset it: ignore (RFC 9113 §5.4.2), but decode
        }
        else
        {
            target = HeaderBlockTarget.NewRequest;
            _lastStreamId = streamId; // leaves idle now, even if it is refused below
        }
        if (frame.HasPriority && frame.StreamDependency == streamId)
        {
            // RFC 9113 §5.3.1: a stream cannot depend on itself (stream error, reported after decoding).
            error ??= new Http2StreamException(streamId, "A stream cannot depend on itself.", Http2ErrorCode.ProtocolError, "self_dependency");
        }

        _headerBlockTarget = target;
        _headerBlockEndStream = frame.EndStream;
        _headerBlockError = error;
        _headerBlockContinuations = 0;
        CheckHeaderBlockSize(frame.HeaderBlockFragment.Length);
        if (frame.EndHeaders)
        {
            CompleteHeaderBlock(streamId, frame.HeaderBlockFragment);
            return;
        }
        if (frame.HeaderBlockFragment.IsEmpty)
        {
            CountEmptyFrame();
        }
        else
        {
            _consecutiveEmptyFrames = 0;
        }
        _headerBlockBuffer = new ArrayBufferWriter<byte>(Math.Max(4096, (int)frame.HeaderBlockFragment.Length));
        Append(frame.HeaderBlockFragment);
        _headerBlockStreamId = streamId;
        // Slowloris guard for the block; the connection is not idle while a block is open.
        SetTimeout(TimeoutKind.HeaderBlock, _options.RequestHeadersTimeout);
        ClearTimeout(TimeoutKind.KeepAlive);
    }

    private void ProcessContinuation(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // RFC 9113 §6.10: CONTINUATION only follows HEADERS/CONTINUATION without END_HEADERS (checked for
        // the other cases before dispatch); here there is no open block at all.
        if (_headerBlockStreamId == 0)
        {
            throw new Http2ConnectionException("CONTINUATION without a header block.", Http2ErrorCode.ProtocolError, "unexpected_continuation");
        }
        var frame = Http2FrameReader.ReadContinuation(header, payload);
        // CVE-2024-27316: bound the frames and bytes of one header block.
        if (++_headerBlockContinuations > _options.MaxContinuationFrames)
        {
            throw new Http2ConnectionException("Too many CONTINUATION frames.", Http2ErrorCode.EnhanceYourCalm, "continuation_flood");
        }
        if (frame.HeaderBlockFragment.IsEmpty && !frame.EndHeaders)
        {
            CountEmptyFrame();
        }
        else if (!frame.HeaderBlockFragment.IsEmpty)
        {
            _consecutiveEmptyFrames = 0;
        }
        CheckHeaderBlockSize(_headerBlockBuffer!.WrittenCount + frame.HeaderBlockFragment.Length);
        Append(frame.HeaderBlockFragment);
        if (!frame.EndHeaders)
        {
            return;
        }
        var streamId = _headerBlockStreamId;
        _headerBlockStreamId = 0;
        ClearTimeout(TimeoutKind.HeaderBlock);
        try
        {
            var gathered = _headerBlockBuffer!.WrittenMemory;
            _headerBlockBuffer = null;
            CompleteHeaderBlock(streamId, new ReadOnlySequence<byte>(gathered));
        }
        finally
        {
            UpdateIdleTimeout();
        }
    }

    private void CheckHeaderBlockSize(long size)
    {
        if (size > _options.MaxHeaderBlockSize)
        {
            throw new Http2ConnectionException("Header block too large.", Http2ErrorCode.EnhanceYourCalm, "header_block_too_large");
        }
    }

    private void CountEmptyFrame()
    {
        if (++_consecutiveEmptyFrames > _options.MaxConsecutiveEmptyFrames)
        {
            throw new Http2ConnectionException("Too many empty frames.", Http2ErrorCode.EnhanceYourCalm, "empty_frame_flood");
        }
    }

    private void Append(in ReadOnlySequence<byte> fragment)
    {
        foreach (var segment in fragment)
        {
            _headerBlockBuffer!.Write(segment.Span);
        }
    }

    private void CompleteHeaderBlock(int streamId, in ReadOnlySequence<byte> block)
    {
        var isTrailers = _headerBlockTarget == HeaderBlockTarget.Trailers;
        _headerCollector.Reset(isTrailers);
        try
        {
            _decoder.Decode(block, _headerCollector);
        }
        catch (HpackDecodingException ex)
        {
            // RFC 9113 §4.3: a header block that cannot be decoded is a COMPRESSION_ERROR connection error.
            throw new Http2ConnectionException(ex.Message, Http2ErrorCode.CompressionError, "hpack_decoding");
        }
        // HPACK bomb (CVE-2016-6581): a small block that decodes far past the budget is abuse, not a big request.
        if (_headerCollector.ListSize > 2L * _options.MaxHeaderListSize)
        {
            throw new Http2ConnectionException("Decoded header list far above the limit.", Http2ErrorCode.EnhanceYourCalm, "header_list_bomb");
        }
        if (_headerBlockError is { } error)
        {
            throw error;
        }
        switch (_headerBlockTarget)
        {
            case HeaderBlockTarget.Ignore:
                return;
            case HeaderBlockTarget.Trailers:
                if (!_streams.TryGetValue(streamId, out var stream))
                {
                    return; // closed while the block arrived
                }
                // RFC 9113 §8.1: trailers carry no pseudo-headers and follow the field rules (malformed -> stream PROTOCOL_ERROR).
                if (_headerCollector.MalformedToken is { } token)
                {
                    throw new Http2StreamException(streamId, "Malformed trailers: " + token, Http2ErrorCode.ProtocolError, token);
                }
                if (_headerCollector.TooLarge)
                {
                    throw new Http2StreamException(streamId, "Trailers too large.", Http2ErrorCode.EnhanceYourCalm, "trailers_too_large");
                }
                stream.RequestTrailers.AddRange(_headerCollector.Fields);
                EndRequest(stream);
                return;
            default:
                OpenStream(streamId, _headerBlockEndStream);
                return;
        }
    }

    private void OpenStream(int streamId, bool endStream)
    {
        _headerCollector.ValidateRequestComplete();
        if (_shutdownPhase == 2 || _peerGoingAway)
        {
            // RFC 9113 §6.8: streams above the last id in our final GOAWAY are not processed; the client may retry.
            EnqueueControl(WriterMessage.RstStream(streamId, null, Http2ErrorCode.RefusedStream, isControl: true));
            RememberReset(streamId);
            _metadata.Metrics?.StreamRefused();
            return;
        }
        // RFC 9113 §8.1.1: a malformed request is a PROTOCOL_ERROR stream error and never reaches the app.
        if (_headerCollector.MalformedToken is { } token)
        {
            throw new Http2StreamException(streamId, "Malformed request: " + token, Http2ErrorCode.ProtocolError, token);
        }
        if (_headerCollector.TooLarge)
        {
            // NOTE: a header list over MaxHeaderListSize / MaxHeaderCount is answered with 431 (RFC 6585) and the
            // stream ends (RST NO_ERROR if the request was still open): the client learns why, the connection
            // and its HPACK state carry on. Only a list far above the budget (checked above) is treated as abuse.
            EnqueueControl(WriterMessage.RejectStream(streamId, 431, resetAfter: !endStream));
            RememberReset(streamId);
            return;
        }
        // RFC 9113 §5.1.2: beyond SETTINGS_MAX_CONCURRENT_STREAMS the stream is refused (REFUSED_STREAM), counted
        // toward the rapid-reset budget. Reset streams whose handler still runs hold their slot. Before the client
        // acknowledged our SETTINGS it may legitimately assume no limit (RFC 9113 §6.5.2 note): not counted then.
        if (_activeStreams >= _options.MaxConcurrentStreams)
        {
            _metadata.Metrics?.StreamRefused();
            ResetStream(new Http2StreamException(streamId, "Too many concurrent streams.", Http2ErrorCode.RefusedStream, "max_concurrent_streams"),
                countTowardRapidReset: _ourSettingsAcknowledged);
            return;
        }
        Http2Stream stream;
        if (_streamPool.TryPop(out var pooled))
        {
            pooled.Reuse(streamId);
            stream = pooled;
        }
        else
        {
            stream = new Http2Stream(this, _handler, streamId, _options.InitialStreamWindowSize) { Connection = _metadata };
        }
        stream.InitializeRequest(_headerCollector, endStream);
        _streams.Add(streamId, stream);
        _liveHandlers.Add(stream);
        _activeStreams++;
        stream.CountedActive = _metadata.Metrics?.StreamStarted() ?? false;
        UpdateIdleTimeout();
        // The app runs on the thread pool, never on the read loop. A handler that takes streams on the event loop (the
        // proxy's direct path) is offered this one after the loop's batch, on this thread; the app still gets those it declines.
        if (!_handlerTakesEventLoop || !stream.TryStartOnEventLoop(_metadata.Scheduler))
        {
            ThreadPool.UnsafeQueueUserWorkItem(stream, preferLocal: false);
        }
    }
}
