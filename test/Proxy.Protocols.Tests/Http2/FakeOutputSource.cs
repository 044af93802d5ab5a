using System.IO.Pipelines;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>
/// A stream as the writer's flow control and scheduler see it: an id and its <see cref="Http2SendState"/>. Nothing
/// of its output is read by those types, so the output members are not implemented.
/// </summary>
internal sealed class FakeOutputSource : IHttp2OutputSource
{
    public FakeOutputSource(int streamId)
    {
        StreamId = streamId;
        Send.Adopt(streamId);
    }

    public int StreamId { get; }
    public bool IsLocallyInitiated => false;
    public Http2SendState Send { get; } = new();
    public PipeReader OutputReader => throw new NotSupportedException();
    public List<KeyValuePair<string, string>>? SubmittedHeaders => null;
    public void OnHeadersSent() { }
    public List<KeyValuePair<string, string>>? SubmittedTrailers => null;
    public bool AbortRequested => false;
    public bool OutputReleased => false;
    public Http2Stream.FileOutput? PendingFile => null;

    public void ClearFile(Http2Stream.FileOutput file) => throw new NotSupportedException();
    public void EndFileOutput() => throw new NotSupportedException();
    public Http2Stream.LentOutput? PendingLent => null;
    public void EndLentOutput() => throw new NotSupportedException();
    public void ClearOutputSignal() => throw new NotSupportedException();

    public override string ToString() => "stream " + StreamId;
}
