using System.Diagnostics.CodeAnalysis;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

// The read loop: preface, frame dispatch and the per-frame rules of RFC 9113 §5-§6.
public sealed partial class Http2Connection
{
    private async Task<bool> ReadPrefaceAsync()
    {
        var preface = Http2FrameReader.ClientPreface.ToArray();
        while (true)
        {
            var result = await _input.ReadAsync(_abortCts.Token);
            var buffer = result.Buffer;
            var matched = false;
            try
            {
                HandleWake();
                if (_stopReading)
                {
                    return false;
                }
                if (buffer.Length >= preface.Length)
                {
                    // RFC 9113 §3.4: a wrong preface is a connection error of type PROTOCOL_ERROR.
                    if (!buffer.Slice(0, preface.Length).ToArray().AsSpan().SequenceEqual(preface))
                    {
                        throw new Http2ConnectionException("Invalid connection preface.", Http2ErrorCode.ProtocolError, "invalid_preface");
                    }
                    matched = true;
                    return true;
                }
                if (result.IsCompleted)
                {
                    _stopReading = true;
                    return false;
                }
            }
            finally
            {
                if (matched)
                {
                    // Bytes after the preface are not examined yet: the frame loop must see them without new input.
                    _input.AdvanceTo(buffer.GetPosition(preface.Length));
                }
                else
                {
                    _input.AdvanceTo(buffer.Start, buffer.End);
                }
            }
        }
    }

    private async Task ReadFramesAsync()
    {
        while (!_stopReading)
        {
            var result = await _input.ReadAsync(_abortCts.Token);
            var buffer = result.Buffer;
            _passNowRead = false;
            try
            {
                HandleWake();
                while (!_stopReading && Http2FrameReader.TryReadFrame(ref buffer, _options.MaxFrameSize, out var header, out var payload))
                {
                    ProcessFrame(header, payload);
                }
                if (result.IsCompleted && !_stopReading)
                {
                    _stopReading = true; // the peer closed its side: nothing more can arrive
                    _gracefulCloseCode = null;
                }
            }
            finally
            {
                _input.AdvanceTo(buffer.Start, buffer.End);
            }
        }
    }

    /// <summary>Drains events posted by the writer loop, handlers and the host, then checks the timer.</summary>
    private void HandleWake()
    {
        LoopOwner.Assert(this, "HandleWake");
        Volatile.Write(ref _wakePending, 0);
        while (_events.TryDequeue(out var e))
        {
            switch (e.Kind)
            {
                case ReadLoopEventKind.OutputEnded:
                    OnOutputEnded((Http2Stream)e.Stream!, e.WasReset);
                    break;
                case ReadLoopEventKind.HandlerFinished:
                    OnHandlerFinished((Http2Stream)e.Stream!);
                    break;
                case ReadLoopEventKind.ProtocolError when e.Exception is Http2ConnectionException connectionError:
                    throw connectionError;
                case ReadLoopEventKind.ProtocolError when e.Exception is Http2StreamException streamError:
                    if (_streams.ContainsKey(streamError.StreamId))
                    {
                        ResetStream(streamError);
                    }
                    break;
                case ReadLoopEventKind.WriterFailed:
                    _writerFailed = true;
                    _stopReading = true;
                    break;
                case ReadLoopEventKind.Shutdown:
                    BeginShutdown();
                    break;
            }
        }
        CheckTimeout();
    }

    private void ProcessFrame(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        LoopOwner.Assert(this, "ProcessFrame");
        // RFC 9113 §3.4: the client's preface ends with a SETTINGS frame, which must come first.
        if (!_peerSettingsReceived && (header.Type != Http2FrameType.Settings || header.HasFlag(Http2FrameFlags.Ack)))
        {
            throw new Http2ConnectionException("The first frame was not SETTINGS.", Http2ErrorCode.ProtocolError, "preface_not_settings");
        }
        // RFC 9113 §6.10: a header block is contiguous; any other frame (or stream) in between is a PROTOCOL_ERROR.
        if (_headerBlockStreamId != 0 && (header.Type != Http2FrameType.Continuation || header.StreamId != _headerBlockStreamId))
        {
            throw new Http2ConnectionException("Expected CONTINUATION for the open header block.", Http2ErrorCode.ProtocolError, "expected_continuation");
        }
        // CVE-2019-9518 counts *adjacent* empty frames: any frame that carries something breaks the run
        // (DATA, HEADERS and CONTINUATION reset it themselves when their content is not empty).
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
                    ProcessPriority(header, payload);
                    break;
                case Http2FrameType.RstStream:
                    ProcessRstStream(header, payload);
                    break;
                case Http2FrameType.Settings:
                    ProcessSettings(header, payload);
                    break;
                case Http2FrameType.PushPromise:
                    // RFC 9113 §8.4: "A client cannot push" — a server treats PUSH_PROMISE as a PROTOCOL_ERROR connection error.
                    throw new Http2ConnectionException("PUSH_PROMISE from a client.", Http2ErrorCode.ProtocolError, "push_promise_from_client");
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
                    // RFC 9113 §5.5: unknown frame types are ignored (the check above keeps them out of header blocks).
                    break;
            }
        }
        catch (Http2StreamException ex)
        {
            ResetStream(ex);
        }
    }

    /// <summary>Odd ids above the highest opened are idle; even ids are never opened by a client (RFC 9113 §5.1.1).</summary>
    private bool IsIdle(int streamId) => streamId > _lastStreamId || (streamId & 1) == 0;

    private void ProcessData(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        if (header.StreamId == 0)
        {
            throw new Http2ConnectionException("DATA on stream 0.", Http2ErrorCode.ProtocolError, "data_stream_zero");
        }
        var frame = Http2FrameReader.ReadData(header, payload);
        if (IsIdle(header.StreamId))
        {
            // RFC 9113 §5.1: DATA on an idle stream is a PROTOCOL_ERROR connection error.
            throw new Http2ConnectionException("DATA on an idle stream.", Http2ErrorCode.ProtocolError, "data_idle_stream");
        }
        // RFC 9113 §6.9.1: a sender MUST NOT exceed the connection window; the whole payload, padding included, counts.
        var length = frame.FlowControlledLength;
        if (length > _connectionWindow.Available)
        {
            throw new Http2ConnectionException("DATA exceeded the connection window.", Http2ErrorCode.FlowControlError, "connection_window_exceeded");
        }
        _connectionWindow.Debit(length);

        if (!_streams.TryGetValue(header.StreamId, out var stream))
        {
            // Closed. Frames after our own RST_STREAM are ignored for a while (RFC 9113 §5.4.2); otherwise
            // DATA on a closed stream is a STREAM_CLOSED error (§5.1). Either way the bytes count and are returned.
            ReturnConnectionCredit(length);
            if (_recentlyReset.Contains(header.StreamId))
            {
                return;
            }
            throw new Http2StreamException(header.StreamId, "DATA on a closed stream.", Http2ErrorCode.StreamClosed, "data_closed_stream");
        }
        if (!Http2StreamStateMachine.CanReceiveData(stream.State))
        {
            // RFC 9113 §5.1: half-closed (remote) accepts no DATA: STREAM_CLOSED.
            ReturnConnectionCredit(length);
            throw new Http2StreamException(header.StreamId, "DATA after END_STREAM.", Http2ErrorCode.StreamClosed, "data_after_end_stream");
        }
        if (length > stream.ReceiveWindow)
        {
            // RFC 9113 §6.9.1: beyond the stream window is a FLOW_CONTROL_ERROR stream error.
            ReturnConnectionCredit(length);
            throw new Http2StreamException(header.StreamId, "DATA exceeded the stream window.", Http2ErrorCode.FlowControlError, "stream_window_exceeded");
        }
        stream.DebitReceiveWindow(length);

        // CVE-2019-9518: empty DATA frames without END_STREAM cost us work and carry nothing.
        if (frame.Data.IsEmpty && !frame.EndStream)
        {
            CountEmptyFrame();
        }
        else
        {
            _consecutiveEmptyFrames = 0;
        }

        // Padding is never read by the app: return its credit now (RFC 9113 §6.1: padding is flow controlled).
        var padding = length - (int)frame.Data.Length;
        if (padding > 0)
        {
            ReturnConnectionCredit(padding);
            stream.ReturnPaddingCredit(padding);
        }

        stream.ReceivedBodyLength += frame.Data.Length;
        // RFC 9113 §8.1.1: DATA beyond a declared content-length makes the request malformed.
        if (stream.RequestContentLength is { } declared && stream.ReceivedBodyLength > declared)
        {
            ReturnConnectionCredit((int)frame.Data.Length);
            throw new Http2StreamException(header.StreamId, "More DATA than content-length.", Http2ErrorCode.ProtocolError, "content_length_exceeded");
        }
        var dropped = stream.DeliverRequestData(frame.Data);
        ReturnConnectionCredit(dropped);

        if (frame.EndStream)
        {
            EndRequest(stream);
        }
    }

    /// <summary>END_STREAM from the peer (DATA or trailers): check content-length, complete the body, advance the state.</summary>
    private void EndRequest(Http2Stream stream)
    {
        // RFC 9113 §8.1.1: a content-length that disagrees with the DATA received is malformed.
        if (stream.RequestContentLength is { } declared && stream.ReceivedBodyLength != declared)
        {
            throw new Http2StreamException(stream.StreamId, "DATA length differs from content-length.", Http2ErrorCode.ProtocolError, "content_length_mismatch");
        }
        stream.EndRequestBody();
        stream.State = Http2StreamStateMachine.OnEndStreamReceived(stream.State);
        if (stream.State == Http2StreamState.Closed)
        {
            RemoveClosedStream(stream);
        }
    }

    private void ProcessPriority(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var frame = Http2FrameReader.ReadPriority(header, payload);
        // RFC 9113 §5.3.1: "A stream cannot depend on itself" — a PROTOCOL_ERROR stream error. Otherwise ignored (§5.3.2).
        if (frame.StreamDependency == header.StreamId)
        {
            throw new Http2StreamException(header.StreamId, "A stream cannot depend on itself.", Http2ErrorCode.ProtocolError, "self_dependency");
        }
    }

    private void ProcessRstStream(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var reset = Http2FrameReader.ReadRstStream(header, payload);
        _metadata.Metrics?.StreamReset(sent: false, reset.ErrorCode);
        // RFC 9113 §6.4: RST_STREAM on an idle stream is a PROTOCOL_ERROR connection error.
        if (IsIdle(header.StreamId))
        {
            throw new Http2ConnectionException("RST_STREAM on an idle stream.", Http2ErrorCode.ProtocolError, "rst_idle_stream");
        }
        if (TakeStream(header.StreamId, out var stream))
        {
            stream.State = Http2StreamStateMachine.OnReset(stream.State);
            // Releases an app waiting in FlushAsync now, not when the (possibly stuck) writer gets to the stream.
            stream.AbortFromConnection("The client reset the stream.");
            EnqueueControl(WriterMessage.StopStream(stream));
            CountReset(); // CVE-2023-44487 rapid reset
            AfterStreamClosed();
        }
        // RST_STREAM on a closed stream is allowed and ignored (RFC 9113 §5.1).
    }

    private void ProcessSettings(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        // Length, stream id, ACK payload and value ranges are checked by the codec (RFC 9113 §6.5, §6.5.2).
        var count = Http2FrameReader.ReadSettings(header, payload);
        if (header.HasFlag(Http2FrameFlags.Ack))
        {
            OnOurSettingsAcknowledged();
            return;
        }
        // MAX_CONCURRENT_STREAMS limits pushes we never make; ENABLE_PUSH is range-checked only.
        var values = PeerSettingsReader.Read(payload, count);
        // The writer applies the values to the encoder and outbound windows, then writes the ACK (RFC 9113 §6.5.3).
        EnqueueControl(WriterMessage.PeerSettings(values.ForWriter));
        if (!_peerSettingsReceived)
        {
            _peerSettingsReceived = true;
            ClearTimeout(TimeoutKind.Preface);
            UpdateIdleTimeout();
        }
    }

    private void ProcessPing(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var ping = Http2FrameReader.ReadPing(header, payload);
        if (ping.IsAck)
        {
            if (ping.OpaqueData == ShutdownPingPayload && _shutdownPhase == 1)
            {
                SendFinalGoAway();
            }
            return;
        }
        // RFC 9113 §6.7: answer with an ACK carrying the same payload.
        EnqueueControl(WriterMessage.PingAck(ping.OpaqueData));
    }

    private void ProcessGoAway(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var goAway = Http2FrameReader.ReadGoAway(header, payload);
        _metadata.Metrics?.GoAway(sent: false, goAway.ErrorCode);
        // RFC 9113 §6.8: the client opens no new streams; the ones we have finish, then we close.
        _peerGoingAway = true;
        if (_streams.Count == 0)
        {
            Stop(Http2ErrorCode.NoError);
        }
    }

    private void ProcessWindowUpdate(in Http2FrameHeader header, in ReadOnlySequence<byte> payload)
    {
        var frame = Http2FrameReader.ReadWindowUpdate(header, payload);
        if (header.StreamId == 0)
        {
            // RFC 9113 §6.9: a zero increment on the connection is a PROTOCOL_ERROR connection error.
            if (frame.WindowSizeIncrement == 0)
            {
                throw new Http2ConnectionException("WINDOW_UPDATE with 0 increment on the connection.", Http2ErrorCode.ProtocolError, "window_update_zero");
            }
            EnqueueControl(WriterMessage.PeerWindowUpdate(null, frame.WindowSizeIncrement));
            return;
        }
        if (IsIdle(header.StreamId))
        {
            // RFC 9113 §5.1: WINDOW_UPDATE on an idle stream is a PROTOCOL_ERROR connection error.
            throw new Http2ConnectionException("WINDOW_UPDATE on an idle stream.", Http2ErrorCode.ProtocolError, "window_update_idle_stream");
        }
        // RFC 9113 §6.9: a zero increment on a stream is a PROTOCOL_ERROR stream error, whatever its state.
        if (frame.WindowSizeIncrement == 0)
        {
            throw new Http2StreamException(header.StreamId, "WINDOW_UPDATE with 0 increment.", Http2ErrorCode.ProtocolError, "window_update_zero");
        }
        if (!_streams.TryGetValue(header.StreamId, out var stream))
        {
            return; // closed: allowed and ignored (RFC 9113 §5.1)
        }
        EnqueueControl(WriterMessage.PeerWindowUpdate(stream, frame.WindowSizeIncrement));
    }

    // ---- Stream lifecycle (read loop) ----

    /// <summary>The one place a stream error becomes RST_STREAM (RFC 9113 §5.4.2); the connection carries on.</summary>
    private void ResetStream(Http2StreamException error, bool countTowardRapidReset = true)
    {
        if (countTowardRapidReset)
        {
            CountReset(); // MadeYouReset (CVE-2025-8671): resets the peer provokes count too
        }
        if (TakeStream(error.StreamId, out var stream))
        {
            stream.State = Http2StreamStateMachine.OnReset(stream.State);
            stream.AbortFromConnection(error.Message);
            EnqueueControl(WriterMessage.RstStream(error.StreamId, stream, error.ErrorCode, isControl: true));
        }
        else
        {
            EnqueueControl(WriterMessage.RstStream(error.StreamId, null, error.ErrorCode, isControl: true));
        }
        RememberReset(error.StreamId);
        AfterStreamClosed();
    }

    private void OnOutputEnded(Http2Stream stream, bool wasReset)
    {
        stream.OutputEnded = true;
        if (!_streams.TryGetValue(stream.StreamId, out var current) || current != stream)
        {
            return; // already closed here
        }
        if (wasReset)
        {
            // The app aborted (or the writer reset) the stream: closed, and we ignore the peer's frames for it.
            RemoveStream(stream);
            stream.State = Http2StreamStateMachine.OnReset(stream.State);
            stream.AbortFromConnection("The stream was reset.");
            RememberReset(stream.StreamId);
            AfterStreamClosed();
            return;
        }
        stream.State = Http2StreamStateMachine.OnEndStreamSent(stream.State);
        if (stream.State == Http2StreamState.Closed)
        {
            RemoveClosedStream(stream);
        }
        else
        {
            ResetIfRequestUnfinished(stream);
        }
    }

    /// <summary>
    /// RFC 9113 §8.1: a server may send a complete response before the request ended, then reset the stream
    /// with NO_ERROR so the client stops sending. Considered once the handler returned and the response is on the
    /// wire; the reset waits up to <see cref="Http2Options.RequestEndGracePeriod"/> for an END_STREAM already on its
    /// way (<see cref="ResetStreamsPastRequestEnd"/>), unless a declared body could not fit in the stream window.
    /// </summary>
    private void ResetIfRequestUnfinished(Http2Stream stream)
    {
        if (!stream.HandlerFinished || !stream.OutputEnded || stream.State != Http2StreamState.HalfClosedLocal
            || stream.AwaitingRequestEnd || !_streams.TryGetValue(stream.StreamId, out var current) || current != stream)
        {
            return;
        }
        var grace = _options.RequestEndGracePeriod;
        if (grace > TimeSpan.Zero
            && (stream.RequestContentLength is not { } declared || declared - stream.ReceivedBodyLength <= stream.ReceiveWindow))
        {
            stream.AwaitingRequestEnd = true;
            stream.RequestEndDeadline = Now + grace;
            if (_deadlines[(int)TimeoutKind.RequestEnd] == NoDeadline)
            {
                SetTimeout(TimeoutKind.RequestEnd, grace);
            }
            return;
        }
        ResetUnfinishedRequest(stream);
    }

    /// <summary>
    /// The request-end timeout: streams whose grace passed without the client's END_STREAM are reset with NO_ERROR;
    /// the timeout is re-armed for the earliest of the others. At most MaxConcurrentStreams streams wait (each keeps
    /// its slot), so the walk is bounded.
    /// </summary>
    private void ResetStreamsPastRequestEnd(TimeSpan now)
    {
        var next = NoDeadline;
        foreach (var stream in _streams.Values)
        {
            if (!stream.AwaitingRequestEnd)
            {
                continue;
            }
            if (stream.RequestEndDeadline <= now)
            {
                _expiredRequestEnds.Add(stream);
            }
            else if (stream.RequestEndDeadline < next)
            {
                next = stream.RequestEndDeadline;
            }
        }
        foreach (var stream in _expiredRequestEnds)
        {
            ResetUnfinishedRequest(stream);
        }
        _expiredRequestEnds.Clear();
        if (next != NoDeadline)
        {
            SetTimeout(TimeoutKind.RequestEnd, next - now);
        }
    }

    private void ResetUnfinishedRequest(Http2Stream stream)
    {
        if (!RemoveStream(stream))
        {
            return;
        }
        stream.State = Http2StreamStateMachine.OnReset(stream.State);
        stream.EndRequestBody();
        EnqueueControl(WriterMessage.RstStream(stream.StreamId, null, Http2ErrorCode.NoError, isControl: true));
        RememberReset(stream.StreamId);
        AfterStreamClosed();
    }

    /// <summary>
    /// Removes a stream from the table. Its concurrency slot is freed only once its handler also finished:
    /// a reset stream whose handler still runs keeps costing memory and a task (RFC 9113 §5.1.2 counts open
    /// streams; like Kestrel and Go we also count the app's work, so a client cannot reset its way past the limit).
    /// </summary>
    private bool TakeStream(int streamId, [MaybeNullWhen(false)] out Http2Stream stream)
    {
        if (!_streams.Remove(streamId, out stream))
        {
            return false;
        }
        _recentlyClosed.Add(streamId);
        if (stream.HandlerFinished)
        {
            _activeStreams--;
        }
        return true;
    }

    private bool RemoveStream(Http2Stream stream) => TakeStream(stream.StreamId, out _);

    private void OnHandlerFinished(Http2Stream stream)
    {
        stream.HandlerFinished = true;
        _liveHandlers.Remove(stream);
        if (!_streams.TryGetValue(stream.StreamId, out var current) || current != stream)
        {
            _activeStreams--; // already out of the table: the slot is free now
        }
        ResetIfRequestUnfinished(stream);
        TryPool(stream);
    }

    private void RemoveClosedStream(Http2Stream stream)
    {
        RemoveStream(stream);
        stream.ClosedNormally = true;
        AfterStreamClosed();
        TryPool(stream);
    }

    /// <summary>
    /// A stream closed by END_STREAM both ways, whose handler finished and whose output the writer loop stopped,
    /// goes back to the pool (the last of the three events gets here). Reset or aborted streams never do: stale
    /// cancellations or frames could reach their next life.
    /// </summary>
    private void TryPool(Http2Stream stream)
    {
        if (stream.ClosedNormally && stream.HandlerFinished && stream.OutputEnded && _streamPool.Count < _streamPool.Capacity
            && !_streams.ContainsKey(stream.StreamId) && stream.TryResetForPool())
        {
            var now = PassNow;
            _streamPool.RemoveReturnedBefore(now - PooledStreamExpiry); // a busy connection trims here, at no timer's cost
            _streamPool.TryPush(stream, now);
            PoolChanged?.Invoke();
            if (_streams.Count == 0 && _deadlines[(int)TimeoutKind.PooledStreamExpiry] == NoDeadline)
            {
                SetTimeout(TimeoutKind.PooledStreamExpiry, PooledStreamExpiry); // idle: no later finish trims the pool, a deadline does
            }
        }
    }

    private void AfterStreamClosed()
    {
        if (_streams.Count == 0 && (_shutdownPhase == 2 || _peerGoingAway))
        {
            Stop(Http2ErrorCode.NoError);
            return;
        }
        UpdateIdleTimeout();
    }

    /// <summary>Remembers streams we reset so their in-flight frames are ignored, bounded to the last few hundred.</summary>
    private void RememberReset(int streamId) => _recentlyReset.Add(streamId);

    /// <summary>Rapid reset guard (CVE-2023-44487): resets and refusals per window, over the limit GOAWAY ENHANCE_YOUR_CALM.</summary>
    private void CountReset()
    {
        var now = _time.GetTimestamp();
        if (_resetsInWindow == 0 || _time.GetElapsedTime(_resetWindowStart, now) > _options.StreamResetWindow)
        {
            _resetWindowStart = now;
            _resetsInWindow = 0;
        }
        if (++_resetsInWindow > _options.MaxStreamResetsPerWindow)
        {
            throw new Http2ConnectionException("Too many stream resets.", Http2ErrorCode.EnhanceYourCalm, "rapid_reset");
        }
    }
}
