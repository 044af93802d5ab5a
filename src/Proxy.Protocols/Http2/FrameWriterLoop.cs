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
    private readonly WriterWake _wake;
    private readonly CountingBufferWriter _output;
    private readonly HpackEncoder _encoder;
    // NOTE: the encoded header block is scratch for the length of one synchronous WriteHeaderBlock call, so it is kept per
    // thread, not per connection (about 1.4 KB per connection was 140 bytes per SSE stream). One grown past
    // MaxKeptHeaderBlock by a huge block is not kept.
    [ThreadStatic] private static ArrayBufferWriter<byte>? t_headerBlock;
    private const int MaxKeptHeaderBlock = 64 * 1024;
    private readonly StreamScheduler _scheduler;
    private readonly SendWindows _windows;
    private readonly TimeProvider _time;
    private ITimer? _flushTimer;
    private int _flushTimedOut; // set by the flush timer (any thread)
    private bool _fileWantsPool; // a file stream's turn came on an event loop (ServiceFileOffTheLoop)
    private bool _lendReturned; // a lent body was framed whole in this pass (ServiceLent): its lender resumes after the pass

    private int _peerMaxFrameSize = 16_384;
    private bool _transportClosed;
    private volatile bool _dropStreamOutput; // set by the read loop when the connection closes
    private readonly bool _clientRole;
    private readonly IProtocolMetrics? _metrics;

    /// <param name="clientRole">True for a client connection: the loop starts with the client preface and disables push.</param>
    /// <param name="metrics">Where frames, resets, GOAWAYs and stalls are counted (a server connection's host), or null.</param>
    /// <param name="wake">Signalled by the producers after each message they queue (and when they complete the queue).</param>
    public FrameWriterLoop(IHttp2WriterOwner connection, Http2Options options, ChannelReader<WriterMessage> messages, WriterWake wake, PipeWriter output,
        TimeProvider time, bool clientRole = false, IProtocolMetrics? metrics = null)
    {
        _wake = wake;
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
                    if (_fileWantsPool)
                    {
                        // A file stream's turn came on an event loop: its reads happen on the thread pool.
                        _fileWantsPool = false;
                        await Task.Yield();
                    }
                    continue;
                }
                if (_output.Unflushed > 0)
                {
                    if (_lendReturned && _wake.Scheduler.IsOnEventLoop)
                    {
                        // A lender got its bytes back in this pass and resumes later in this batch: its next chunk then
                        // leaves in the same write instead of one of its own (unless a signal came meanwhile: see YieldAsync).
                        _lendReturned = false;
                        await _wake.YieldAsync();
                        continue;
                    }
                    await FlushAsync(); // the queue drained: one flush for everything gathered
                    continue;
                }
                if (_messages.Completion.IsCompleted)
                {
                    break; // completed by the connection, and every message taken
                }
                await _wake.WaitAsync();
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
                if (ApplyPeerSettings(message.Settings!))
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

    /// <summary>Encodes a field list and writes it as HEADERS plus CONTINUATION frames within the peer's max frame size (RFC 9113 §6.10).</summary>
    /// <returns>False when nothing was written: encoding failed and the connection is closing.</returns>
    private bool WriteHeaderBlock(int streamId, List<KeyValuePair<string, string>> fields, bool endStream)
    {
        if (_dropStreamOutput)
        {
            return false;
        }
        var headerBlock = t_headerBlock ??= new ArrayBufferWriter<byte>(1024);
        headerBlock.ResetWrittenCount();
        try
        {
            _encoder.BeginHeaderBlock(headerBlock);
            foreach (var (name, value) in fields)
            {
                _encoder.EncodeHeader(headerBlock, name, value, neverIndex: name is "authorization" or "set-cookie" or "proxy-authorization");
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
        var block = headerBlock.WrittenSpan;
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
        if (headerBlock.Capacity > MaxKeptHeaderBlock)
        {
            t_headerBlock = null;
        }
        return true;
    }

    /// <summary>The stream will write nothing more: drop its queued output and tell the read loop.</summary>
    private void StopStream(IHttp2OutputSource stream, bool wasReset)
    {
        _windows.Release(stream);
        stream.Send.OutputStopped = true;
        stream.EndFileOutput();
        stream.EndLentOutput();
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
            stream.EndLentOutput();
            stream.OutputReader.Complete();
        }
    }
}
