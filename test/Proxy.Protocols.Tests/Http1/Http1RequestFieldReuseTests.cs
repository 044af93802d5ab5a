using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Protocols.Http1;

namespace Proxy.Protocols.Tests.Http1;

// The HTTP/1.1 server's request head sink (the exchange): the target and fields reuse the strings of the head this thread
// parsed last, whichever connection it came from, and only when the octets are the same.
public class Http1RequestFieldReuseTests
{
    // An exchange stands for a connection here: only its sink side is used (no connection, no transport).
    private static Http1Exchange Parse(string target, params (string Name, string Value)[] fields)
    {
        var exchange = new Http1Exchange(null!) { Connection = new ConnectionMetadata { ConnectionId = "t" } };
        IHttp1RequestSink sink = exchange;
        sink.OnRequestLine("GET"u8, Encoding.ASCII.GetBytes(target), Http1Version.Http11, Http1TargetForm.Origin);
        foreach (var (name, value) in fields)
        {
            sink.OnField(Encoding.ASCII.GetBytes(name), Encoding.Latin1.GetBytes(value));
        }
        return exchange;
    }

    private static readonly (string, string)[] H2loadHead = [("Host", "127.0.0.1:18080"), ("User-Agent", "h2load nghttp2/1.52.0")];

    [Fact]
    public void TwoConnectionsOnOneThread_ShareTheTargetAndFieldStrings()
    {
        var first = Parse("/size/1024", H2loadHead);
        var second = Parse("/size/1024", H2loadHead);

        Assert.Equal("/size/1024", second.RawTarget);
        Assert.Same(first.RawTarget, second.RawTarget);
        Assert.Equal([("Host", "127.0.0.1:18080"), ("User-Agent", "h2load nghttp2/1.52.0")], second.RequestHeaders.Select(f => (f.Key, f.Value)));
        for (var i = 0; i < first.RequestHeaders.Count; i++)
        {
            Assert.Same(first.RequestHeaders[i].Key, second.RequestHeaders[i].Key);
            Assert.Same(first.RequestHeaders[i].Value, second.RequestHeaders[i].Value);
        }
        Assert.Equal("127.0.0.1:18080", second.Authority);
    }

    [Fact]
    public void OtherOctets_AreTheirOwnStrings_AndNamesKeepTheirCase()
    {
        Parse("/size/1024", H2loadHead);
        var other = Parse("/size/2048", ("host", "example.test"), ("User-Agent", "curl/8"), ("Accept", "*/*"));
        var again = Parse("/size/2048", ("host", "example.test"), ("User-Agent", "curl/8"), ("Accept", "*/*"));

        Assert.Equal("/size/2048", other.RawTarget);
        Assert.Equal([("host", "example.test"), ("User-Agent", "curl/8"), ("Accept", "*/*")], other.RequestHeaders.Select(f => (f.Key, f.Value)));
        Assert.Equal("example.test", other.Authority);
        Assert.Same(other.RequestHeaders[1].Value, again.RequestHeaders[1].Value); // the changed value is remembered in turn
        Assert.Same(other.RawTarget, again.RawTarget);
    }

    [Fact]
    public void ReusedExchange_AfterReset_StillReadsEachRequest()
    {
        var exchange = Parse("/a", ("Host", "one.test"), ("X-N", "1"));
        exchange.Reset();
        IHttp1RequestSink sink = exchange;
        sink.OnRequestLine("GET"u8, "/b"u8, Http1Version.Http11, Http1TargetForm.Origin);
        sink.OnField("Host"u8, "one.test"u8);
        sink.OnField("X-N"u8, "2"u8);

        Assert.Equal("/b", exchange.RawTarget);
        Assert.Equal([("Host", "one.test"), ("X-N", "2")], exchange.RequestHeaders.Select(f => (f.Key, f.Value)));
    }
}
