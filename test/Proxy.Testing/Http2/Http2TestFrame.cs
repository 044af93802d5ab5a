using System.Buffers;
using Proxy.Codecs.Http2;

namespace Proxy.Testing.Http2;

/// <summary>A frame the scripted peer received: the header plus a copy of its payload, with typed views.</summary>
public sealed record Http2TestFrame(Http2FrameHeader Header, byte[] Payload)
{
    public Http2FrameType Type => Header.Type;
    public int StreamId => Header.StreamId;
    public Http2FrameFlags Flags => Header.Flags;
    public ReadOnlySequence<byte> PayloadSequence => new(Payload);
    public bool EndStream => (Type is Http2FrameType.Data or Http2FrameType.Headers) && Header.HasFlag(Http2FrameFlags.EndStream);
    public bool IsAck => (Type is Http2FrameType.Settings or Http2FrameType.Ping) && Header.HasFlag(Http2FrameFlags.Ack);

    public DataFrame AsData() => Http2FrameReader.ReadData(Header, PayloadSequence);
    public RstStreamFrame AsRstStream() => Http2FrameReader.ReadRstStream(Header, PayloadSequence);
    public GoAwayFrame AsGoAway() => Http2FrameReader.ReadGoAway(Header, PayloadSequence);
    public PingFrame AsPing() => Http2FrameReader.ReadPing(Header, PayloadSequence);
    public WindowUpdateFrame AsWindowUpdate() => Http2FrameReader.ReadWindowUpdate(Header, PayloadSequence);

    public IReadOnlyList<Http2Setting> AsSettings()
    {
        var count = Http2FrameReader.ReadSettings(Header, PayloadSequence);
        var list = new List<Http2Setting>(count);
        for (var i = 0; i < count; i++)
        {
            list.Add(Http2FrameReader.ReadSetting(PayloadSequence, i));
        }
        return list;
    }

    public override string ToString() => $"{Type} stream={StreamId} flags={Flags} length={Payload.Length}";
}

/// <summary>A decoded header block (HEADERS + CONTINUATION) as the peer received it.</summary>
public sealed record Http2TestHeaders(int StreamId, IReadOnlyList<KeyValuePair<string, string>> Fields, bool EndStream)
{
    /// <summary>First value of <paramref name="name"/>, or null.</summary>
    public string? this[string name] => Fields.FirstOrDefault(f => f.Key == name).Value;
}
