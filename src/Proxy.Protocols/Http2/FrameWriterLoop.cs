using System.Threading.Channels;
using Proxy.Codecs.Hpack;
using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

/// <summary>
/// The single writer of one connection. It is the only reader of the bounded writer channel and owns:
/// the HPACK encoder and its dynamic table, the outbound flow-control windows (<see cref="SendWindows"/>),
/// the round-robin scheduler of streams with pending output (<see cref="StreamScheduler"/>), and the transport write.
///
/// Each pass: take every queued message (control frames are written at once, streams join the ready queue),
/// give each ready stream one turn (its HEADERS and at most one DATA frame), and flush the transport once
/// the queue drains or <see cref="Http2Options.MaxWriteBatchSize"/> bytes are waiting.
///
/// NOTE: HPACK encoding happens here, not on the app's thread. Encoding and writing are then one step in
/// one loop, so dynamic-table insertions reach the wire in exactly the order they were encoded (RFC 7541
/// §2.3.2) without a lock and without giving up the dynamic table. The cost (encoding on one thread per
/// connection) is small next to the transport write the loop does anyway.
/// </summary>
// Owned by the frame-writer loop.
internal sealed partial class FrameWriterLoop
{
    private readonly IHttp2WriterOwner _connection;
    private readonly Http2Options _options;
    private readonly ChannelReader<WriterMessage> _messages;
    private readonly CountingBufferWriter _output;
    private readonly HpackEncoder _encoder;
    private readonly ArrayBufferWriter<byte> _headerBlock = new(1024);
    private readonly StreamScheduler _scheduler;
    private readonly SendWindows _windows;
    private readonly TimeProvider _time;
    private ITimer? _flushTimer;
    private int _flushTimedOut; // set by the flush timer (any thread)

    private int _peerMaxFrameSize = 16_384;
    private bool _transportClosed;
    private volatile bool _dropStreamOutput; // set by the read loop when the connection closes
    private readonly bool _clientRole;
    private readonly IProtocolMetrics? _metrics;

    /// <param name="clientRole">True for a client connection: the loop starts with the client preface and disables push.</param>
    /// <param name="metrics">Where frames, resets, GOAWAYs and stalls are counted (a server connection's host), or null.</param>
    public FrameWriterLoop(IHttp2WriterOwner connection, Http2Options options, ChannelReader<WriterMessage> messages, PipeWriter output, TimeProvider time,
        bool clientRole = false, IProtocolMetrics? metrics = null)
    {
        _clientRole = clientRole;
        _metrics = metrics;
        _time = time;
        _connection = connection;
        _options = options;
        _messages = messages;
        _output = new CountingBufferWriter(output);
        _encoder = new HpackEncoder(Math.Min(4096, options.MaxEncoderHeaderTableSize));
        _scheduler = new StreamScheduler(ServiceStream);
        _windows = new SendWindows(_scheduler, time, metrics);
    }

    public async Task RunAsync()
    {
        LoopOwner.Enter(this);
        if (_options.WriteTimeout != Timeout.InfiniteTimeSpan)
        {
            _flushTimer = _time.CreateTimer(static state => ((FrameWriterLoop)state!).OnFlushTimeout(), this, Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
        }
        try
        {
            WriteOurSettings();
            while (!_transportClosed)
            {
                while (_messages.TryRead(out var message))
                {
                    Handle(message);
                    if (_output.Unflushed >= _options.MaxWriteBatchSize)
                    {
                        await FlushAsync();
                    }
                }
                if (_scheduler.HasReady)
                {
                    _scheduler.ServicePass();
                    if (_output.Unflushed >= _options.MaxWriteBatchSize)
                    {
                        await FlushAsync();
                    }
                    continue;
                }
                if (_output.Unflushed > 0)
                {
                    await FlushAsync(); // the queue drained: one flush for everything gathered
                    continue;
                }
                if (!await _messages.WaitToReadAsync())
                {
                    break;
                }
            }
            if (_output.Unflushed > 0 && !_transportClosed)
            {
                await FlushAsync();
            }
        }
        catch (Exception ex)
        {
            _connection.PostEvent(ReadLoopEvent.WriterFailed(ex));
        }
        finally
        {
            // Frames written but never flushed (the loop failed) still reach the transport when it completes.
            _output.Commit();
            _flushTimer?.Dispose();
            StopAllStreams();
        }
    }

    /// <summary>
    /// One transport flush. A flush that waits longer than <see cref="Http2Options.WriteTimeout"/> means the peer
    /// stopped reading (slow-read DoS): the flush is cancelled and the connection aborted, so neither the bytes
    /// queued behind it nor the handlers waiting on it are held forever.
    /// </summary>
    private async ValueTask FlushAsync()
    {
        if (_metrics is { WriterBatchEnabled: true } metrics)
        {
            metrics.WriterBatch(_output.Frames, _output.Unflushed);
        }
        _output.Frames = 0;
        _output.Commit();
        var flush = _output.Inner.FlushAsync();
        FlushResult result;
        if (flush.IsCompleted || _flushTimer is null)
        {
            result = await flush;
        }
        else
        {
            _flushTimer.Change(_options.WriteTimeout, Timeout.InfiniteTimeSpan);
            try
            {
                result = await flush;
            }
            finally
            {
                _flushTimer.Change(Timeout.InfiniteTimeSpan, Timeout.InfiniteTimeSpan);
            }
        }
        _output.Unflushed = 0;
        if (Volatile.Read(ref _flushTimedOut) == 1)
        {
            throw new TimeoutException("The peer did not read the connection's output within the write timeout.");
        }
        if (result.IsCompleted || result.IsCanceled)
        {
            _transportClosed = true;
        }
    }

    /// <summary>Read loop, closing: write no more HEADERS or DATA (every stream is being aborted); control frames and GOAWAY still go.</summary>
    internal void DropStreamOutput() => _dropStreamOutput = true;

    private void OnFlushTimeout()
    {
        Volatile.Write(ref _flushTimedOut, 1);
        _output.Inner.CancelPendingFlush();
    }

    /// <summary>
    /// RFC 9113 §3.4: the server preface is a SETTINGS frame, sent first; a client's starts with the connection preface
    /// octets, then SETTINGS (with ENABLE_PUSH 0: we never accept pushes, §8.4). Then the connection window is raised (§6.9.2).
    /// </summary>
    private void WriteOurSettings()
    {
        Span<Http2Setting> settings = stackalloc Http2Setting[5];
        var count = 0;
        if (_clientRole)
        {
            _output.Write(Http2FrameReader.ClientPreface);
            settings[count++] = new(Http2SettingsParameter.EnablePush, 0);
        }
        else
        {
            settings[count++] = new(Http2SettingsParameter.MaxConcurrentStreams, (uint)_options.MaxConcurrentStreams);
        }
        settings[count++] = new(Http2SettingsParameter.InitialWindowSize, (uint)_options.InitialStreamWindowSize);
        settings[count++] = new(Http2SettingsParameter.MaxFrameSize, (uint)_options.MaxFrameSize);
        settings[count++] = new(Http2SettingsParameter.MaxHeaderListSize, (uint)_options.MaxHeaderListSize);
        if (_options.HeaderTableSize != 4096)
        {
            settings[count++] = new(Http2SettingsParameter.HeaderTableSize, (uint)_options.HeaderTableSize);
        }
        Http2FrameWriter.WriteSettings(_output, settings[..count]);
        _output.Frames++;
        var raise = _options.InitialConnectionWindowSize - SendWindows.DefaultWindow;
        if (raise > 0)
        {
            Http2FrameWriter.WriteWindowUpdate(_output, 0, raise);
            _output.Frames++;
        }
    }

    private void Handle(in WriterMessage message)
    {
        LoopOwner.Assert(this, "FrameWriterLoop.Handle");
        if (message.IsControl)
        {
            _connection.OnControlFrameDequeued();
        }
        if (message.Stream is { } target)
        {
            if (target.StreamId != message.StreamId)
            {
                // Queued for an earlier life of a pooled stream (a late output signal): that life ended normally,
                // so its output is over. A reset the read loop asked for still goes out; an app's is skipped, as
                // for any stream that already ended.
                if (message.Kind == WriterMessageKind.RstStream && !message.Flag)
                {
                    WriteRstStream(message.StreamId, message.ErrorCode);
                }
                return;
            }
            // NOTE: the id the message was queued for, not a second read: the stream may be pooled and reused
            // between the check above and here, and this message must then land on its old life's fields.
            target.Send.Adopt(message.StreamId);
        }
        switch (message.Kind)
        {
            case WriterMessageKind.StreamOutput:
                _scheduler.Schedule(message.Stream!);
                break;
            case WriterMessageKind.PeerSettings:
                // RFC 9113 §6.5.3: SETTINGS we reject with a connection error are not acknowledged.
                if (ApplyPeerSettings(message.Settings))
                {
                    Http2FrameWriter.WriteSettingsAck(_output);
                    _output.Frames++;
                }
                break;
            case WriterMessageKind.PingAck:
                Http2FrameWriter.WritePing(_output, (ulong)message.Value, ack: true);
                _output.Frames++;
                break;
            case WriterMessageKind.Ping:
                Http2FrameWriter.WritePing(_output, (ulong)message.Value, ack: false);
                _output.Frames++;
                break;
            case WriterMessageKind.WindowUpdate:
                Http2FrameWriter.WriteWindowUpdate(_output, message.StreamId, (int)message.Value);
                _output.Frames++;
                break;
            case WriterMessageKind.PeerWindowUpdate:
                if (_windows.ApplyWindowUpdate(message.Stream, (int)message.Value) is { } windowError)
                {
                    _connection.PostEvent(ReadLoopEvent.Error(windowError));
                }
                break;
            case WriterMessageKind.RstStream:
                if (message.Stream is { IsLocallyInitiated: true } unopened && !unopened.Send.HeadersSent)
                {
                    // A stream we opened whose HEADERS never left: the peer does not know it (idle, RFC 9113 §6.4), so
                    // there is nothing to reset. Its output stops; the id is simply skipped (§5.1.1).
                    if (!unopened.Send.OutputStopped)
                    {
                        StopStream(unopened, wasReset: true);
                    }
                    return;
                }
                if (message.Stream is { } reset)
                {
                    if (!reset.Send.OutputStopped)
                    {
                        if (message.Flag)
                        {
                            WriteFlushedOutputBeforeReset(reset);
                        }
                        StopStream(reset, wasReset: true);
                    }
                    else if (message.Flag)
                    {
                        return; // the app aborted a stream that already ended: nothing left to reset
                    }
                }
                WriteRstStream(message.StreamId, message.ErrorCode);
                break;
            case WriterMessageKind.StopStream:
                if (!message.Stream!.Send.OutputStopped)
                {
                    StopStream(message.Stream, wasReset: true);
                }
                break;
            case WriterMessageKind.RejectStream:
                if (WriteHeaderBlock(message.StreamId, [new(":status", ((int)message.Value).ToString(System.Globalization.CultureInfo.InvariantCulture))], endStream: true)
                    && message.Flag)
                {
                    WriteRstStream(message.StreamId, Http2ErrorCode.NoError);
                }
                break;
            case WriterMessageKind.GoAway:
                Http2FrameWriter.WriteGoAway(_output, message.StreamId, message.ErrorCode, default);
                _output.Frames++;
                _metrics?.GoAway(sent: true, message.ErrorCode);
                break;
        }
    }

    private void WriteRstStream(int streamId, Http2ErrorCode code)
    {
        Http2FrameWriter.WriteRstStream(_output, streamId, code);
        _output.Frames++;
        _metrics?.StreamReset(sent: true, code);
    }

    /// <returns>False when the values caused a connection error (already posted to the read loop).</returns>
    private bool ApplyPeerSettings(PeerSettingsChange change)
    {
        if (change.HeaderTableSize is { } tableSize)
        {
            _encoder.SetPeerMaxDynamicTableSize(Math.Min(tableSize, _options.MaxEncoderHeaderTableSize));
        }
        if (change.MaxFrameSize is { } frameSize)
        {
            _peerMaxFrameSize = frameSize;
        }
        if (change.InitialWindowSize is { } initial && _windows.ApplyInitialWindowSize(initial) is { } error)
        {
            _connection.PostEvent(ReadLoopEvent.Error(error));
            return false;
        }
        return true;
    }

    /// <summary>Writes the stream's HEADERS (once) and at most one DATA frame. Returns true when it has more ready now.</summary>
    private bool ServiceStream(IHttp2OutputSource stream)
    {
        LoopOwner.Assert(this, "FrameWriterLoop.ServiceStream");
        stream.Send.Adopt(stream.StreamId); // a ready-queue entry may be from the stream's previous life
        // The read loop flags a reset stream before its StopStream message is queued: do not write a response the
        // peer already cancelled (RFC 9113 §5.1: no frames but PRIORITY on a closed stream).
        if (stream.Send.OutputStopped || stream.AbortRequested || stream.OutputReleased || _dropStreamOutput)
        {
            return false;
        }
        stream.ClearOutputSignal();
        _windows.Track(stream);
        var reader = stream.OutputReader;
        var hasRead = reader.TryRead(out var result);
        var buffer = hasRead ? result.Buffer : default;
        var completed = hasRead && result.IsCompleted;
        var trailers = completed ? stream.SubmittedTrailers : null;

        if (!stream.Send.HeadersSent)
        {
            var headers = stream.SubmittedHeaders;
            if (headers is null)
            {
                if (hasRead)
                {
                    reader.AdvanceTo(buffer.Start);
                }
                return false;
            }
            // A response without body or trailers ends the stream on HEADERS.
            var endOnHeaders = completed && buffer.IsEmpty && trailers is null;
            if (!WriteHeaderBlock(stream.StreamId, headers, endOnHeaders))
            {
                if (hasRead)
                {
                    reader.AdvanceTo(buffer.Start);
                }
                return false;
            }
            stream.Send.HeadersSent = true;
            if (endOnHeaders)
            {
                reader.AdvanceTo(buffer.End);
                StopStream(stream, wasReset: false);
                return false;
            }
        }
        if (!hasRead)
        {
            // Body bytes written before a SendFileAsync went first; the file follows once the pipe is empty.
            return stream.PendingFile is { } file && ServiceFile(stream, file);
        }
        if (!buffer.IsEmpty)
        {
            var allowed = DataAllowance(stream, buffer.Length);
            if (allowed <= 0)
            {
                reader.AdvanceTo(buffer.Start);
                _windows.WaitForWindow(stream);
                return false;
            }
            var chunk = buffer.Slice(0, allowed);
            var last = completed && allowed == buffer.Length && trailers is null;
            Http2FrameWriter.WriteData(_output, stream.StreamId, chunk, last);
            _output.Frames++;
            _windows.Debit(stream, allowed);
            reader.AdvanceTo(chunk.End);
            if (last)
            {
                StopStream(stream, wasReset: false);
                return false;
            }
            // A file handed over after these bytes is next (its signal may have been the one this turn consumed).
            return allowed < buffer.Length || completed || stream.PendingFile is not null;
        }
        reader.AdvanceTo(buffer.End);
        if (completed)
        {
            if (trailers is not null)
            {
                if (!WriteHeaderBlock(stream.StreamId, trailers, endStream: true))
                {
                    return false;
                }
            }
            else
            {
                Http2FrameWriter.WriteData(_output, stream.StreamId, ReadOnlySpan<byte>.Empty, endStream: true);
                _output.Frames++;
            }
            StopStream(stream, wasReset: false);
            return false;
        }
        return stream.PendingFile is { } pending && ServiceFile(stream, pending);
    }

    /// <summary>
    /// Bytes of <paramref name="available"/> the next DATA frame may carry: bounded by the windows and the peer's
    /// SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.9.1, §4.2). Zero or less: wait for a WINDOW_UPDATE.
    /// </summary>
    private long DataAllowance(IHttp2OutputSource stream, long available)
        => _windows.Allowance(stream, Math.Min(_peerMaxFrameSize, available));

    // The smallest file read worth a frame when the current output block is nearly full: below it, start a new block.
    // Header plus this fits a 4 KiB block, so a pool of small blocks is never asked for more than it holds.
    private const int MinFileFrame = 4096 - Http2FrameHeader.Size;

    /// <summary>
    /// One DATA frame of a file the app handed over (<see cref="Http2Stream.SendFileAsync"/>): the payload is read from
    /// the file straight into the transport's memory behind the frame header, within the windows and the peer's max
    /// frame size, and sized to the output block so one read fills one frame. Returns true when more can go now.
    /// </summary>
    private bool ServiceFile(IHttp2OutputSource stream, Http2Stream.FileOutput file)
    {
        if (file.IsEnded)
        {
            stream.ClearFile(file); // cancelled or reset on the app's side
            return false;
        }
        var allowed = (int)DataAllowance(stream, file.Remaining);
        if (allowed <= 0)
        {
            _windows.WaitForWindow(stream);
            return false;
        }
        var span = _output.GetSpan(Http2FrameHeader.Size + Math.Min(allowed, MinFileFrame));
        var payload = span.Slice(Http2FrameHeader.Size, Math.Min(allowed, span.Length - Http2FrameHeader.Size));
        int read;
        try
        {
            read = RandomAccess.Read(file.Handle, payload, file.Position);
        }
        catch (Exception ex)
        {
            // The app's SendFileAsync throws it and the engine resets the stream; the connection carries on.
            stream.ClearFile(file);
            file.Fail(ex);
            return false;
        }
        if (file.IsEnded)
        {
            // Cancelled or reset during the read: the bytes are not advanced, so nothing of them goes out.
            stream.ClearFile(file);
            return false;
        }
        if (read > 0)
        {
            Http2FrameWriter.WriteFrameHeader(span, new Http2FrameHeader(read, Http2FrameType.Data, Http2FrameFlags.None, stream.StreamId));
            _output.Advance(Http2FrameHeader.Size + read);
            _output.Frames++;
            _windows.Debit(stream, read);
            file.Position += read;
            file.Remaining -= read;
        }
        if (read == 0 || file.Remaining == 0)
        {
            // Sent, or the file shrank (the body ends short, as on HTTP/1.1). The app writes or completes next.
            stream.ClearFile(file);
            file.End();
            return false;
        }
        return true;
    }

    /// <summary>Encodes a field list and writes it as HEADERS plus CONTINUATION frames within the peer's max frame size (RFC 9113 §6.10).</summary>
    /// <returns>False when nothing was written: encoding failed and the connection is closing.</returns>
    private bool WriteHeaderBlock(int streamId, List<KeyValuePair<string, string>> fields, bool endStream)
    {
        if (_dropStreamOutput)
        {
            return false;
        }
        _headerBlock.ResetWrittenCount();
        try
        {
            _encoder.BeginHeaderBlock(_headerBlock);
            foreach (var (name, value) in fields)
            {
                _encoder.EncodeHeader(_headerBlock, name, value, neverIndex: name is "authorization" or "set-cookie" or "proxy-authorization");
            }
        }
        catch (Exception ex)
        {
            // Fields are validated on the app's thread, so this is a bug, not bad input. The encoder may have
            // changed its dynamic table for a block the peer never sees, so the HPACK contexts no longer agree
            // (RFC 7541 §2.3.2): no further header block can go out. Close the connection with GOAWAY.
            _dropStreamOutput = true;
            _connection.PostEvent(ReadLoopEvent.Error(new Http2ConnectionException(
                "Encoding a header block failed: " + ex.Message, Http2ErrorCode.InternalError, "header_encoding_failed")));
            return false;
        }
        var block = _headerBlock.WrittenSpan;
        var first = Math.Min(block.Length, _peerMaxFrameSize);
        Http2FrameWriter.WriteHeaders(_output, streamId, block[..first], endStream, endHeaders: first == block.Length);
        _output.Frames++;
        block = block[first..];
        while (!block.IsEmpty)
        {
            var size = Math.Min(block.Length, _peerMaxFrameSize);
            Http2FrameWriter.WriteContinuation(_output, streamId, block[..size], endHeaders: size == block.Length);
            _output.Frames++;
            block = block[size..];
        }
        return true;
    }

    /// <summary>
    /// The app aborted a stream: what it already flushed (HEADERS, DATA within the windows) goes out before the
    /// RST_STREAM, with END_STREAM only when the app completed the response before it reset the stream. NOTE: without
    /// this, a proxy relaying "message, then backend failure" lost the message (and even the response headers)
    /// whenever the abort overtook the writer loop; Kestrel keeps that order too.
    /// </summary>
    private void WriteFlushedOutputBeforeReset(IHttp2OutputSource stream)
    {
        if (_dropStreamOutput)
        {
            return; // closing: no HEADERS or DATA go out any more, only the RST_STREAM
        }
        if (!stream.Send.HeadersSent)
        {
            if (stream.SubmittedHeaders is not { } headers)
            {
                return;
            }
            WriteHeaderBlock(stream.StreamId, headers, endStream: false);
            stream.Send.HeadersSent = true;
        }
        // A stream the loop never serviced (reset right after its first flush) has no send window yet: without this its
        // bytes met a window of 0 and were dropped.
        _windows.Track(stream);
        var reader = stream.OutputReader;
        if (!reader.TryRead(out var result))
        {
            return;
        }
        var buffer = result.Buffer;
        while (!buffer.IsEmpty)
        {
            // Still bounded by the windows (RFC 9113 §6.9.1); what they do not allow is dropped.
            var allowed = DataAllowance(stream, buffer.Length);
            if (allowed <= 0)
            {
                break;
            }
            var chunk = buffer.Slice(0, allowed);
            Http2FrameWriter.WriteData(_output, stream.StreamId, chunk, endStream: false);
            _output.Frames++;
            _windows.Debit(stream, allowed);
            buffer = buffer.Slice(chunk.End);
        }
        reader.AdvanceTo(buffer.Start);
        // A response the app completed (CompleteAsync: trailers published, pipe completed) before it reset the stream
        // goes out whole, END_STREAM included, then the RST_STREAM, as on Kestrel. Grpc.AspNetCore relies on it at a
        // deadline: CompleteAsync with grpc-status DEADLINE_EXCEEDED, then Reset(); without it the client lost the
        // status and saw only the reset.
        if (buffer.IsEmpty && result.IsCompleted)
        {
            if (stream.SubmittedTrailers is { } trailers)
            {
                WriteHeaderBlock(stream.StreamId, trailers, endStream: true);
            }
            else
            {
                Http2FrameWriter.WriteData(_output, stream.StreamId, ReadOnlySpan<byte>.Empty, endStream: true);
                _output.Frames++;
            }
        }
    }

    /// <summary>The stream will write nothing more: drop its queued output and tell the read loop.</summary>
    private void StopStream(IHttp2OutputSource stream, bool wasReset)
    {
        _windows.Release(stream);
        stream.Send.OutputStopped = true;
        stream.EndFileOutput();
        // Completing the reader releases an app waiting in FlushAsync (it sees IsCompleted).
        stream.OutputReader.Complete();
        _connection.PostEvent(ReadLoopEvent.OutputEnded(stream, wasReset));
    }

    private void StopAllStreams()
    {
        foreach (var stream in _windows.ReleaseAll())
        {
            Stop(stream);
        }
        while (_scheduler.TryRemoveNext(out var stream))
        {
            Stop(stream);
        }

        static void Stop(IHttp2OutputSource stream)
        {
            stream.Send.OutputStopped = true;
            stream.EndFileOutput();
            stream.OutputReader.Complete();
        }
    }
}
