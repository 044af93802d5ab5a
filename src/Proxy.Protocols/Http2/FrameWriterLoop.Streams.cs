using Proxy.Codecs.Http2;

namespace Proxy.Protocols.Http2;

// A stream's turn in the writer loop: its HEADERS (once), DATA within the send windows and the peer's max frame size,
// a file the app handed over, trailers or END_STREAM; and what an app that aborts has already flushed.
// Owned by the frame-writer loop.
internal sealed partial class FrameWriterLoop
{
    /// <summary>Writes the stream's HEADERS (once) and at most one DATA frame. Returns true when it has more ready now.</summary>
    private bool ServiceStream(IHttp2OutputSource stream)
    {
        LoopOwner.Assert(this, "FrameWriterLoop.ServiceStream");
        stream.Send.Adopt(stream.StreamId); // a ready-queue entry may be from the stream's previous life
        // The read loop flags a reset stream before its StopStream message is queued: do not write a response the
        // peer already cancelled (RFC 9113 §5.1: no frames but PRIORITY on a closed stream).
        if (stream.Send.OutputStopped || stream.AbortRequested || stream.OutputReleased || _dropStreamOutput)
        {
            // Each of these is the end of the stream's output: a lent body goes back unsent.
            stream.EndLentOutput();
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
            stream.OnHeadersSent();
            if (endOnHeaders)
            {
                reader.AdvanceTo(buffer.End);
                StopStream(stream, wasReset: false);
                return false;
            }
        }
        if (!hasRead)
        {
            // Body bytes written before a SendFileAsync or a lend went first; the file or lent body follows once the pipe is empty.
            return ServiceHandedOver(stream);
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
            // A file or lent body handed over after these bytes is next (its signal may have been the one this turn consumed).
            return allowed < buffer.Length || completed || stream.PendingFile is not null || stream.PendingLent is not null;
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
        return ServiceHandedOver(stream);
    }

    /// <summary>What the app handed over to follow the pipe's bytes: a lent body, else a file; false when neither is there.</summary>
    private bool ServiceHandedOver(IHttp2OutputSource stream)
    {
        if (stream.PendingLent is { } lent)
        {
            return ServiceLent(stream, lent);
        }
        return stream.PendingFile is { } file && ServiceFileOffTheLoop(stream, file);
    }

    /// <summary>
    /// One DATA frame of a body the sender lent (<see cref="Http2Stream.LendResponseBodyAsync"/>), within the windows and
    /// the peer's max frame size, copied from the sender's memory into the connection's output. Once the last byte is
    /// framed (or the sender revoked the lend) the sender gets the memory back. Returns true when more can go now.
    /// </summary>
    private bool ServiceLent(IHttp2OutputSource stream, Http2Stream.LentOutput lent)
    {
        if (!lent.TryBeginCopy())
        {
            return false; // ended meanwhile (the client reset the stream, the app aborted): the bytes are the sender's again
        }
        if (lent.Revoked)
        {
            lent.FinishFromCopy(sent: false);
            return false;
        }
        var remaining = lent.Remaining;
        if (remaining.IsEmpty)
        {
            lent.FinishFromCopy(sent: true);
            return false;
        }
        var allowed = DataAllowance(stream, remaining.Length);
        if (allowed <= 0)
        {
            lent.EndCopy();
            _windows.WaitForWindow(stream);
            return false;
        }
        var chunk = remaining.Slice(0, allowed);
        Http2FrameWriter.WriteData(_output, stream.StreamId, chunk, endStream: false);
        _output.Frames++;
        _windows.Debit(stream, allowed);
        if (allowed == remaining.Length)
        {
            // Copied: the memory is the sender's again. What ends the stream (the pipe's completion) comes after this.
            lent.FinishFromCopy(sent: true);
            _lendReturned = true;
            return false;
        }
        lent.Remaining = remaining.Slice(chunk.End);
        lent.EndCopy(); // an end asked for during the copy (a reset) happens here
        return true;
    }

    /// <summary>
    /// A file's next frame, read synchronously (<see cref="ServiceFile"/>), never on an event loop: there a read that
    /// waits on a disk would hold up every connection of the thread. On one, the stream stays ready and the loop moves
    /// to the thread pool first (<see cref="_fileWantsPool"/>, taken in RunAsync).
    /// </summary>
    private bool ServiceFileOffTheLoop(IHttp2OutputSource stream, Http2Stream.FileOutput file)
    {
        if (_wake.Scheduler.IsOnEventLoop)
        {
            _fileWantsPool = true;
            return true;
        }
        return ServiceFile(stream, file);
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
            stream.OnHeadersSent();
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
}
