using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;
using Proxy.Protocols.Client;

namespace Proxy.Protocols.Http2.Client;

// The read loop of a client connection: frame dispatch and the per-frame rules of RFC 9113 §5-§8 for the client role.
public sealed partial class Http2ClientConnection
{
    private async Task ReadFramesAsync()
    {
        while (!_stopReading)
        {
            var result = await _input.ReadAsync(_abortCts.Token);
            var buffer = result.Buffer;
            try
            {
                HandleWake();
                if (!buffer.IsEmpty)
                {
                    _lastFrameTimestamp = _time.GetTimestamp();
                }
                while (!_stopReading && Http2FrameReader.TryReadFrame(ref buffer, _options.MaxFrameSize, out var header, out var payload))
                {
                    ProcessFrame(header, payload);
                }
                if (result.IsCompleted && !_stopReading)
                {
                    _stopReading = true;
                    _goAwayCode = null;
                }
            }
            finally
            {
                _input.AdvanceTo(buffer.Start, buffer.End);
            }
        }
    }

    private void HandleWake()
    {
        LoopOwner.Assert(this, "Http2ClientConnection.HandleWake");
        Volatile.Write(ref _wakePending, 0);
        while (_events.TryDequeue(out var e))
        {
            switch (e.Kind)
            {
                case ClientEventKind.OutputEnded:
                    OnOutputEnded(e.Stream!, e.WasReset);
                    break;
                case ClientEventKind.Abandoned:
                    OnAbandoned(e.Stream!, e.Code);
                    break;
                case ClientEventKind.WriterError when e.Error is Http2ConnectionException connectionError:
                    throw connectionError;
                case ClientEventKind.WriterError when e.Error is Http2StreamException streamError:
                    ResetStream(streamError, new BackendException(BackendFailure.ProtocolError, streamError.Message, (uint)streamError.ErrorCode));
                    break;
                case ClientEventKind.WriterFailed:
                    _writerFailed = true;
                    _stopReading = true;
                    _closeReason = "Writing to the backend failed: " + e.Error?.Message;
                    break;
                case ClientEventKind.Shutdown:
                    lock (_openLock)
                    {
                        _goingAway = true;
                    }
                    StateChanged?.Invoke(this);
                    if (_streams.IsEmpty)
                    {
                        _stopReading = true;
                        _goAwayCode = Http2ErrorCode.NoError;
                    }
                    break;
            }
        }
        CheckTimer();
    }

    private void ProcessFrame(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        LoopOwner.Assert(this, "Http2ClientConnection.ProcessFrame");
        // RFC 9113 §3.4: the server's preface is a SETTINGS frame and MUST be the first frame it sends.
        if (!_peerSettingsReceived && (header.Type != Http2FrameType.Settings || header.HasFlag(Http2FrameFlags.Ack)))
        {
            throw new Http2ConnectionException("The backend's first frame was not SETTINGS.", Http2ErrorCode.ProtocolError, "preface_not_settings");
        }
        // RFC 9113 §6.10: a header block is contiguous.
        if (_headerBlockStreamId != 0 && (header.Type != Http2FrameType.Continuation || header.StreamId != _headerBlockStreamId))
        {
            throw new Http2ConnectionException("Expected CONTINUATION for the open header block.", Http2ErrorCode.ProtocolError, "expected_continuation");
        }
        if (header.Length > 0 && header.Type is not (Http2FrameType.Data or Http2FrameType.Headers or Http2FrameType.Continuation))
        {
            _consecutiveEmptyFrames = 0;
        }
        try
        {
            switch (header.Type)
            {
                case Http2FrameType.Data:
                    ProcessData(header, payload);
                    break;
                case Http2FrameType.Headers:
                    ProcessHeaders(header, payload);
                    break;
                case Http2FrameType.Continuation:
                    ProcessContinuation(header, payload);
                    break;
                case Http2FrameType.Priority:
                    var priority = Http2FrameReader.ReadPriority(header, payload);
                    if (priority.StreamDependency == header.StreamId)
                    {
                        throw new Http2StreamException(header.StreamId, "A stream cannot depend on itself.", Http2ErrorCode.ProtocolError, "self_dependency");
                    }
                    break;
                case Http2FrameType.RstStream:
                    ProcessRstStream(header, payload);
                    break;
                case Http2FrameType.Settings:
                    ProcessSettings(header, payload);
                    break;
                case Http2FrameType.PushPromise:
                    // RFC 9113 §8.4: we sent SETTINGS_ENABLE_PUSH 0, so a PUSH_PROMISE is a PROTOCOL_ERROR connection error.
                    throw new Http2ConnectionException("PUSH_PROMISE with push disabled.", Http2ErrorCode.ProtocolError, "push_promise_disabled");
                case Http2FrameType.Ping:
                    ProcessPing(header, payload);
                    break;
                case Http2FrameType.GoAway:
                    ProcessGoAway(header, payload);
                    break;
                case Http2FrameType.WindowUpdate:
                    ProcessWindowUpdate(header, payload);
                    break;
                default:
                    break; // RFC 9113 §5.5: unknown frame types are ignored
            }
        }
        catch (Http2StreamException ex)
        {
            ResetStream(ex, new BackendException(BackendFailure.ProtocolError, "The backend broke HTTP/2 on this stream: " + ex.Message, (uint)ex.ErrorCode));
        }
    }

    /// <summary>Streams we never opened: even ids (the server opens none, push is off) and odd ids above the highest we opened (RFC 9113 §5.1.1).</summary>
    private bool IsIdle(int streamId) => (streamId & 1) == 0 || streamId > _highestOpenedId;

    private void ProcessData(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        if (header.StreamId == 0)
        {
            throw new Http2ConnectionException("DATA on stream 0.", Http2ErrorCode.ProtocolError, "data_stream_zero");
        }
        var frame = Http2FrameReader.ReadData(header, payload);
        if (IsIdle(header.StreamId))
        {
            throw new Http2ConnectionException("DATA on an idle stream.", Http2ErrorCode.ProtocolError, "data_idle_stream");
        }
        var length = frame.FlowControlledLength;
        // RFC 9113 §6.9.1: a sender MUST NOT exceed the connection window.
        if (length > _connectionWindow.Available)
        {
            throw new Http2ConnectionException("DATA exceeded the connection window.", Http2ErrorCode.FlowControlError, "connection_window_exceeded");
        }
        _connectionWindow.Debit(length);
        if (!_streams.TryGetValue(header.StreamId, out var stream))
        {
            ReturnConnectionCredit(length);
            if (_recentlyReset.Contains(header.StreamId))
            {
                return; // frames in flight after our RST_STREAM (RFC 9113 §5.4.2)
            }
            throw new Http2StreamException(header.StreamId, "DATA on a closed stream.", Http2ErrorCode.StreamClosed, "data_closed_stream");
        }
        if (stream.RemoteEnded)
        {
            ReturnConnectionCredit(length);
            throw new Http2StreamException(header.StreamId, "DATA after END_STREAM.", Http2ErrorCode.StreamClosed, "data_after_end_stream");
        }
        if (!stream.HeadReceived)
        {
            // RFC 9113 §8.1: a response starts with a HEADERS frame; DATA first makes it malformed.
            ReturnConnectionCredit(length);
            throw new Http2StreamException(header.StreamId, "DATA before the response HEADERS.", Http2ErrorCode.ProtocolError, "data_before_headers");
        }
        if (length > stream.ReceiveWindow)
        {
            ReturnConnectionCredit(length);
            throw new Http2StreamException(header.StreamId, "DATA exceeded the stream window.", Http2ErrorCode.FlowControlError, "stream_window_exceeded");
        }
        stream.DebitReceiveWindow(length);
        if (frame.Data.IsEmpty && !frame.EndStream)
        {
            CountEmptyFrame();
        }
        else
        {
            _consecutiveEmptyFrames = 0;
        }
        var padding = length - (int)frame.Data.Length;
        if (padding > 0)
        {
            ReturnConnectionCredit(padding);
            stream.ReturnPaddingCredit(padding);
        }
        stream.ReceivedBodyLength += frame.Data.Length;
        // RFC 9113 §8.1.1: DATA beyond a declared content-length makes the response malformed.
        if (stream.DeclaredContentLength is { } declared && stream.ReceivedBodyLength > declared)
        {
            ReturnConnectionCredit((int)frame.Data.Length);
            throw new Http2StreamException(header.StreamId, "More DATA than content-length.", Http2ErrorCode.ProtocolError, "content_length_exceeded");
        }
        ReturnConnectionCredit(stream.DeliverData(frame.Data));
        if (frame.EndStream)
        {
            EndResponse(stream);
        }
    }

    private void EndResponse(Http2ClientStream stream)
    {
        // RFC 9113 §8.1.1: a content-length that disagrees with the DATA received is malformed (HEAD responses carry none).
        if (!stream.IsHead && stream.DeclaredContentLength is { } declared && stream.ReceivedBodyLength != declared)
        {
            throw new Http2StreamException(stream.StreamId, "DATA length differs from content-length.", Http2ErrorCode.ProtocolError, "content_length_mismatch");
        }
        stream.EndResponse();
        if (stream.OutputEnded)
        {
            CloseStream(stream);
        }
    }

    private void ProcessHeaders(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        if (header.StreamId == 0)
        {
            throw new Http2ConnectionException("HEADERS on stream 0.", Http2ErrorCode.ProtocolError, "headers_stream_zero");
        }
        var frame = Http2FrameReader.ReadHeaders(header, payload);
        if (IsIdle(header.StreamId))
        {
            // RFC 9113 §5.1.1: a server cannot open streams; HEADERS on an id we never used is a PROTOCOL_ERROR.
            throw new Http2ConnectionException("HEADERS on a stream the client never opened.", Http2ErrorCode.ProtocolError, "headers_idle_stream");
        }
        _headerBlockEndStream = frame.EndStream;
        _headerBlockContinuations = 0;
        CheckHeaderBlockSize(frame.HeaderBlockFragment.Length);
        if (frame.EndHeaders)
        {
            CompleteHeaderBlock(header.StreamId, frame.HeaderBlockFragment);
            return;
        }
        if (frame.HeaderBlockFragment.IsEmpty)
        {
            CountEmptyFrame();
        }
        _headerBlockBuffer = new ArrayBufferWriter<byte>(Math.Max(4096, (int)frame.HeaderBlockFragment.Length));
        Append(frame.HeaderBlockFragment);
        _headerBlockStreamId = header.StreamId;
    }

    private void ProcessContinuation(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        if (_headerBlockStreamId == 0)
        {
            throw new Http2ConnectionException("CONTINUATION without a header block.", Http2ErrorCode.ProtocolError, "unexpected_continuation");
        }
        var frame = Http2FrameReader.ReadContinuation(header, payload);
        // CVE-2024-27316 from a hostile backend: bound the frames and bytes of one header block.
        if (++_headerBlockContinuations > _options.MaxContinuationFrames)
        {
            throw new Http2ConnectionException("Too many CONTINUATION frames.", Http2ErrorCode.EnhanceYourCalm, "continuation_flood");
        }
        if (frame.HeaderBlockFragment.IsEmpty && !frame.EndHeaders)
        {
            CountEmptyFrame();
        }
        CheckHeaderBlockSize(_headerBlockBuffer!.WrittenCount + frame.HeaderBlockFragment.Length);
        Append(frame.HeaderBlockFragment);
        if (!frame.EndHeaders)
        {
            return;
        }
        var streamId = _headerBlockStreamId;
        _headerBlockStreamId = 0;
        var gathered = _headerBlockBuffer!.WrittenMemory;
        _headerBlockBuffer = null;
        CompleteHeaderBlock(streamId, new ReadOnlySequence<byte>(gathered));
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
        _streams.TryGetValue(streamId, out var stream);
        var isTrailers = stream is { HeadReceived: true };
        _collector.Reset(isTrailers);
        try
        {
            _decoder.Decode(block, _collector);
        }
        catch (HpackDecodingException ex)
        {
            // RFC 9113 §4.3: a header block that cannot be decoded is a COMPRESSION_ERROR connection error.
            throw new Http2ConnectionException(ex.Message, Http2ErrorCode.CompressionError, "hpack_decoding");
        }
        if (_collector.ListSize > 2L * _options.MaxHeaderListSize)
        {
            throw new Http2ConnectionException("Decoded header list far above the limit.", Http2ErrorCode.EnhanceYourCalm, "header_list_bomb");
        }
        if (stream is null)
        {
            // Reset by us or closed: decoded only to keep the HPACK table in sync (RFC 9113 §4.3), then dropped.
            if (!_recentlyReset.Contains(streamId))
            {
                throw new Http2StreamException(streamId, "HEADERS on a closed stream.", Http2ErrorCode.StreamClosed, "headers_closed_stream");
            }
            return;
        }
        if (stream.RemoteEnded)
        {
            throw new Http2StreamException(streamId, "HEADERS after END_STREAM.", Http2ErrorCode.StreamClosed, "headers_after_end_stream");
        }
        if (_collector.TooLarge)
        {
            throw new Http2StreamException(streamId, "Response header list over MaxHeaderListSize.", Http2ErrorCode.ProtocolError, "response_headers_too_large");
        }
        if (isTrailers)
        {
            // RFC 9113 §8.1: a trailer section ends the stream and carries no pseudo-headers.
            if (!_headerBlockEndStream)
            {
                throw new Http2StreamException(streamId, "Trailers without END_STREAM.", Http2ErrorCode.ProtocolError, "trailers_without_end_stream");
            }
            if (_collector.MalformedToken is { } trailerToken)
            {
                throw new Http2StreamException(streamId, "Malformed trailers: " + trailerToken, Http2ErrorCode.ProtocolError, trailerToken);
            }
            stream.OnTrailers(_collector.Fields);
            EndResponse(stream);
            return;
        }
        _collector.ValidateResponseComplete();
        if (_collector.MalformedToken is { } token)
        {
            throw new Http2StreamException(streamId, "Malformed response: " + token, Http2ErrorCode.ProtocolError, token);
        }
        var status = _collector.Status;
        if (status < 200)
        {
            // RFC 9113 §8.1: interim (1xx) responses come in their own HEADERS without END_STREAM; 101 is not allowed (§8.6).
            if (status == 101 || _headerBlockEndStream)
            {
                throw new Http2StreamException(streamId, "Invalid interim response " + status + ".", Http2ErrorCode.ProtocolError, "invalid_interim_response");
            }
            return;
        }
        stream.DeclaredContentLength = _collector.ContentLength;
        stream.OnResponseHead(status, _collector.Fields, endStream: false);
        if (_headerBlockEndStream)
        {
            EndResponse(stream);
        }
    }

    private void ProcessRstStream(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var frame = Http2FrameReader.ReadRstStream(header, payload);
        if (IsIdle(header.StreamId))
        {
            throw new Http2ConnectionException("RST_STREAM on an idle stream.", Http2ErrorCode.ProtocolError, "rst_idle_stream");
        }
        if (!_streams.TryRemove(header.StreamId, out var stream))
        {
            return; // closed: allowed and ignored (RFC 9113 §5.1)
        }
        _recentlyReset.Add(header.StreamId);
        // The request side stops at once: the writer drops what is queued and the relay's next flush sees the end.
        stream.ReleaseOutput();
        EnqueueControl(WriterMessage.StopStream(stream));
        if (stream.RemoteEnded && frame.ErrorCode == Http2ErrorCode.NoError)
        {
            // RFC 9113 §8.1: a server may answer completely before the request ended, then reset with NO_ERROR to stop
            // the upload. The response stands.
            FinishStream(stream, null);
            return;
        }
        var failure = frame.ErrorCode == Http2ErrorCode.RefusedStream ? BackendFailure.Refused : BackendFailure.StreamReset;
        FinishStream(stream, new BackendException(failure, $"The backend reset the stream ({frame.ErrorCode}).", (uint)frame.ErrorCode));
    }

    private void ProcessSettings(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var count = Http2FrameReader.ReadSettings(header, payload);
        if (header.HasFlag(Http2FrameFlags.Ack))
        {
            if (!_ourSettingsAcknowledged)
            {
                _ourSettingsAcknowledged = true;
                if (_options.HeaderTableSize < 4096)
                {
                    _decoder.SetMaxDynamicTableSize(_options.HeaderTableSize);
                }
            }
            return;
        }
        var values = PeerSettingsReader.Read(payload, count);
        // RFC 9113 §6.5.2: a server MUST NOT send 1; "a client MUST treat receipt of a SETTINGS frame with
        // SETTINGS_ENABLE_PUSH set to 1 as a connection error of type PROTOCOL_ERROR".
        if (values.EnablePush is > 0)
        {
            throw new Http2ConnectionException("SETTINGS_ENABLE_PUSH from a server.", Http2ErrorCode.ProtocolError, "enable_push_from_server");
        }
        if (values.MaxConcurrentStreams is { } maxStreams)
        {
            // Our own ceiling still applies: a backend allowing 2^31 streams does not make us open them all here.
            _peerMaxConcurrentStreams = (int)Math.Min(maxStreams, (uint)Math.Max(1, _clientOptions.MaxStreamsPerConnection));
        }
        EnqueueControl(WriterMessage.PeerSettings(values.ForWriter));
        if (!_peerSettingsReceived)
        {
            _peerSettingsReceived = true;
            ArmTimer();
        }
        StateChanged?.Invoke(this);
    }

    private void ProcessPing(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var ping = Http2FrameReader.ReadPing(header, payload);
        if (ping.IsAck)
        {
            if (_pingOutstanding && ping.OpaqueData == _pingPayload)
            {
                _pingOutstanding = false;
                ArmTimer();
            }
            return;
        }
        EnqueueControl(WriterMessage.PingAck(ping.OpaqueData));
    }

    private void ProcessGoAway(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var frame = Http2FrameReader.ReadGoAway(header, payload);
        // RFC 9113 §6.8: streams above the last id were not processed and may be retried on another connection; the rest
        // may complete. The last id can only go down in later GOAWAYs.
        // Under the open lock: no stream is opened between this flag and the scan below.
        lock (_openLock)
        {
            _goingAway = true;
            if (frame.LastStreamId < _goAwayLastStreamId)
            {
                _goAwayLastStreamId = frame.LastStreamId;
            }
        }
        var reason = frame.ErrorCode == Http2ErrorCode.NoError
            ? "The backend is shutting down (GOAWAY) and did not process this stream."
            : $"The backend closed the connection with GOAWAY ({frame.ErrorCode}).";
        foreach (var stream in _streams.Values)
        {
            if (stream.StreamId > frame.LastStreamId && _streams.TryRemove(stream.StreamId, out _))
            {
                _recentlyReset.Add(stream.StreamId);
                stream.ReleaseOutput();
                EnqueueControl(WriterMessage.StopStream(stream));
                FinishStream(stream, new BackendException(BackendFailure.Refused, reason, (uint)frame.ErrorCode));
            }
        }
        if (frame.ErrorCode != Http2ErrorCode.NoError)
        {
            _closeReason = reason;
        }
        StateChanged?.Invoke(this);
        if (_streams.IsEmpty)
        {
            _stopReading = true;
            _goAwayCode = Http2ErrorCode.NoError;
        }
    }

    private void ProcessWindowUpdate(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var frame = Http2FrameReader.ReadWindowUpdate(header, payload);
        if (header.StreamId == 0)
        {
            if (frame.WindowSizeIncrement == 0)
            {
                throw new Http2ConnectionException("WINDOW_UPDATE with 0 increment on the connection.", Http2ErrorCode.ProtocolError, "window_update_zero");
            }
            EnqueueControl(WriterMessage.PeerWindowUpdate(null, frame.WindowSizeIncrement));
            return;
        }
        if (IsIdle(header.StreamId))
        {
            throw new Http2ConnectionException("WINDOW_UPDATE on an idle stream.", Http2ErrorCode.ProtocolError, "window_update_idle_stream");
        }
        if (frame.WindowSizeIncrement == 0)
        {
            throw new Http2StreamException(header.StreamId, "WINDOW_UPDATE with 0 increment.", Http2ErrorCode.ProtocolError, "window_update_zero");
        }
        if (_streams.TryGetValue(header.StreamId, out var stream))
        {
            EnqueueControl(WriterMessage.PeerWindowUpdate(stream, frame.WindowSizeIncrement));
        }
    }

    // ---- Stream lifecycle (read loop) ----

    /// <summary>The one place a stream error becomes RST_STREAM (RFC 9113 §5.4.2); the connection and its other streams carry on.</summary>
    private void ResetStream(Http2StreamException error, BackendException failure)
    {
        if (_streams.TryRemove(error.StreamId, out var stream))
        {
            stream.ReleaseOutput();
            EnqueueControl(WriterMessage.RstStream(error.StreamId, stream, error.ErrorCode, isControl: true));
            FinishStream(stream, failure);
        }
        else
        {
            EnqueueControl(WriterMessage.RstStream(error.StreamId, null, error.ErrorCode, isControl: true));
        }
        _recentlyReset.Add(error.StreamId);
        AfterStreamClosed();
    }

    private void OnOutputEnded(Http2ClientStream stream, bool wasReset)
    {
        stream.OutputEnded = true;
        if (!_streams.TryGetValue(stream.StreamId, out var current) || current != stream)
        {
            return;
        }
        if (wasReset)
        {
            _streams.TryRemove(stream.StreamId, out _);
            _recentlyReset.Add(stream.StreamId);
            FinishStream(stream, new BackendException(BackendFailure.Aborted, "The stream was reset."));
            AfterStreamClosed();
            return;
        }
        if (stream.RemoteEnded)
        {
            CloseStream(stream);
        }
    }

    private void OnAbandoned(Http2ClientStream stream, Http2ErrorCode code)
    {
        if (!_streams.TryRemove(stream.StreamId, out _))
        {
            return; // already closed or failed
        }
        _recentlyReset.Add(stream.StreamId);
        stream.ReleaseOutput();
        // RFC 9113 §5.1: a stream closed both ways takes no RST_STREAM; otherwise CANCEL tells the backend to stop.
        if (!(stream.RemoteEnded && stream.OutputEnded))
        {
            EnqueueControl(WriterMessage.RstStream(stream.StreamId, stream, code, isControl: true));
        }
        FinishStream(stream, new BackendException(BackendFailure.Aborted, "The exchange was aborted."));
        AfterStreamClosed();
    }

    private void CloseStream(Http2ClientStream stream)
    {
        _streams.TryRemove(stream.StreamId, out _);
        FinishStream(stream, null);
        AfterStreamClosed();
    }

    private void AfterStreamClosed()
    {
        if (_goingAway && _streams.IsEmpty)
        {
            _stopReading = true;
            _goAwayCode = Http2ErrorCode.NoError;
        }
    }
}
