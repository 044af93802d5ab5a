using System.Text;
using Proxy.Protocols.Http1.Client;

namespace Proxy.Protocols.Tests.Http1;

// The response head's field sink of the HTTP/1.1 client: fields in order, lowercased, connection-specific ones dropped, and
// strings reused from the head this thread parsed last (whichever connection it came from).
public class Http1ResponseFieldSinkTests
{
    private static HttpHeaderList Parse(params (string Name, string Value)[] fields)
    {
        var list = new HttpHeaderList();
        var sink = new Http1ClientExchange.ResponseFieldSink(list);
        sink.Start(list);
        foreach (var (name, value) in fields)
        {
            sink.OnField(Encoding.Latin1.GetBytes(name), Encoding.Latin1.GetBytes(value));
        }
        sink.RemoveConnectionOptions();
        return list;
    }

    private static readonly (string, string)[] KestrelHead =
        [("Content-Length", "1024"), ("Content-Type", "application/octet-stream"), ("Date", "Thu, 03 Dec 2026 14:53:24 GMT")];

    [Fact]
    public void TwoHeadsOnOneThread_FromTwoConnections_ShareTheirStrings()
    {
        // Two sinks stand for two backend connections: the second head's names and values are the first head's strings.
        var first = Parse(KestrelHead);
        var second = Parse(KestrelHead);

        Assert.Equal(["content-length", "content-type", "date"], second.Select(f => f.Key));
        Assert.Equal(["1024", "application/octet-stream", "Thu, 03 Dec 2026 14:53:24 GMT"], second.Select(f => f.Value));
        for (var i = 0; i < first.Count; i++)
        {
            Assert.Same(first[i].Key, second[i].Key);
            Assert.Same(first[i].Value, second[i].Value);
        }
    }

    [Fact]
    public void AValueThatChanged_IsTheNewOne_AndTheNextHeadReusesIt()
    {
        Parse(KestrelHead);
        var later = Parse(("Content-Length", "1024"), ("Content-Type", "application/octet-stream"), ("Date", "Thu, 03 Dec 2026 14:53:25 GMT"));
        var next = Parse(("content-length", "1024"), ("CONTENT-TYPE", "application/octet-stream"), ("date", "Thu, 03 Dec 2026 14:53:25 GMT"));

        Assert.Equal("Thu, 03 Dec 2026 14:53:25 GMT", later[2].Value);
        Assert.Same(later[2].Value, next[2].Value);
        Assert.Equal(["content-length", "content-type", "date"], next.Select(f => f.Key)); // lowercased whatever the case sent
    }

    [Fact]
    public void ADifferentHead_GetsItsOwnFields_AndConnectionSpecificOnesStayOut()
    {
        Parse(KestrelHead);
        var other = Parse(("Date", "Thu, 03 Dec 2026 14:53:24 GMT"), ("Connection", "keep-alive, x-hop"), ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"), ("Content-Length", "2048"), ("Content-Length-X", "1024"));

        Assert.Equal([("date", "Thu, 03 Dec 2026 14:53:24 GMT"), ("content-length", "2048"), ("content-length-x", "1024")],
            other.Select(f => (f.Key, f.Value)));
        // The head after it, the first shape again, is right from the slots the different head left.
        Assert.Equal(["content-length", "content-type", "date"], Parse(KestrelHead).Select(f => f.Key));
    }

    [Fact]
    public async Task AHeadStartedOnOneThread_AndFinishedOnAnother_GetsItsFields()
    {
        // A head split over two reads may go on on another thread, with the slots of the thread that started it.
        var list = new HttpHeaderList();
        var sink = new Http1ClientExchange.ResponseFieldSink(list);
        sink.Start(list);
        sink.OnField("Content-Length"u8, "5"u8);
        await Task.Run(() =>
        {
            Parse(("Content-Type", "text/plain"), ("Server", "other")); // that thread's own heads meanwhile
            sink.OnField("Content-Type"u8, "text/event-stream"u8);
            sink.OnField("Date"u8, "Thu, 03 Dec 2026 14:53:24 GMT"u8);
        });

        Assert.Equal([("content-length", "5"), ("content-type", "text/event-stream"), ("date", "Thu, 03 Dec 2026 14:53:24 GMT")],
            list.Select(f => (f.Key, f.Value)));
    }
}
