namespace Proxy.Protocols.Http2;

/// <summary>
/// What the frame-writer loop needs of a stream that sends: a server stream's response, a client stream's request.
/// The sender fills <see cref="SubmittedHeaders"/>, writes body bytes into the pipe behind <see cref="OutputReader"/>,
/// sets <see cref="SubmittedTrailers"/> before completing that pipe, and signals the loop; the loop does the rest
/// (HPACK, windows, frame sizes, END_STREAM). The same loop therefore serves both roles.
/// </summary>
internal interface IHttp2OutputSource
{
    /// <summary>The stream's current id (a pooled stream changes it between lives).</summary>
    int StreamId { get; }

    /// <summary>
    /// True for a stream this endpoint opened (a client's request). Until its HEADERS went out the stream is idle for the
    /// peer, and RST_STREAM on an idle stream is a connection error (RFC 9113 §6.4): the loop resets it only after HEADERS.
    /// </summary>
    bool IsLocallyInitiated { get; }

    /// <summary>The writer loop's own per-stream state.</summary>
    Http2SendState Send { get; }

    /// <summary>The body bytes to send; completed by the sender at the end of its body.</summary>
    PipeReader OutputReader { get; }

    /// <summary>The header block (pseudo-headers first), published before the first output signal.</summary>
    List<KeyValuePair<string, string>>? SubmittedHeaders { get; }

    /// <summary>The loop sent <see cref="SubmittedHeaders"/> and will not read them again (it set HeadersSent).</summary>
    void OnHeadersSent();

    /// <summary>Trailing fields, published before the output pipe completes; null for none.</summary>
    List<KeyValuePair<string, string>>? SubmittedTrailers { get; }

    /// <summary>The sender aborted: an RST_STREAM message follows; nothing may end the stream normally meanwhile.</summary>
    bool AbortRequested { get; }

    /// <summary>The read loop closed the stream (peer reset, stream error, connection closing): nothing more goes out.</summary>
    bool OutputReleased { get; }

    /// <summary>A file range to send after the pipe's bytes (server responses only), or null.</summary>
    Http2Stream.FileOutput? PendingFile { get; }

    /// <summary>The file is done (sent, failed, cancelled); clears it unless the sender already moved on.</summary>
    void ClearFile(Http2Stream.FileOutput file);

    /// <summary>The stream sends nothing more: ends a pending file send.</summary>
    void EndFileOutput();

    /// <summary>Called before the loop looks at the stream's output, so a later flush signals again (a full fence).</summary>
    void ClearOutputSignal();

    /// <summary>A body lent by the sender, to frame after the pipe's bytes (server responses only), or null.</summary>
    Http2Stream.LentOutput? PendingLent { get; }

    /// <summary>The stream sends nothing more: hands a lent body back unsent, and any later one at once.</summary>
    void EndLentOutput();
}

/// <summary>
/// One stream's outbound state as the frame-writer loop keeps it: its send window (RFC 9113 §6.9), whether its
/// HEADERS went out, and its place in the scheduler. <see cref="Adopt"/> starts a pooled stream's new life.
/// </summary>
// Owned by the frame-writer loop.
internal sealed class Http2SendState
{
    /// <summary>The id of the life these fields belong to.</summary>
    public int WriterStreamId;
    public long SendWindow;
    public bool SendWindowInitialized;
    public bool HeadersSent;
    public bool OutputStopped;
    /// <summary>Whether the stream object sits in the ready queue (whatever life queued it).</summary>
    public bool InReadyQueue;
    public bool BlockedOnStreamWindow;
    public bool InConnectionBlockedList;
    /// <summary>When the stream started waiting for send window (TimeProvider timestamp), 0 when not waiting or not timed.</summary>
    public long StallStart;

    /// <summary>
    /// A pooled stream in a new life (<paramref name="id"/> is not the one the fields belong to): the fields of the
    /// previous life are reset, by their owner, the first time the loop meets the stream again. InReadyQueue is kept.
    /// </summary>
    public void Adopt(int id)
    {
        if (WriterStreamId != id)
        {
            WriterStreamId = id;
            SendWindow = 0;
            SendWindowInitialized = false;
            HeadersSent = false;
            OutputStopped = false;
            BlockedOnStreamWindow = false;
            StallStart = 0;
            InConnectionBlockedList = false; // StopStream took it out of the list in the previous life
        }
    }
}

/// <summary>The connection a frame-writer loop writes for: where the loop reports to its read loop.</summary>
internal interface IHttp2WriterOwner
{
    /// <summary>Posts an event for the read loop and wakes it (any thread).</summary>
    void PostEvent(ReadLoopEvent e);

    /// <summary>A control frame left the writer queue.</summary>
    void OnControlFrameDequeued();
}
