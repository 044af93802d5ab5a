using System.Text;
using Proxy.Protocols.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>The collector interns known strings and reuses the previous block's strings: both must stay exact.</summary>
public class RequestHeaderCollectorTests
{
    private static RequestHeaderCollector Collect(RequestHeaderCollector collector, params (string Name, string Value)[] fields)
    {
        collector.Reset(isTrailers: false);
        foreach (var (name, value) in fields)
        {
            collector.OnHeader(Encoding.Latin1.GetBytes(name), Encoding.Latin1.GetBytes(value));
        }
        collector.ValidateRequestComplete();
        return collector;
    }

    [Fact]
    public void OnHeader_KnownNameAndValue_ReturnsInternedStrings()
    {
        var first = Collect(new RequestHeaderCollector(16_384, 100),
            (":method", "POST"), (":scheme", "https"), (":path", "/a"), ("content-type", "application/grpc"), ("te", "trailers"));

        Assert.Null(first.MalformedToken);
        Assert.Same(KnownHeaderStrings.FindValue("POST"u8), first.Method);
        Assert.Equal("https", first.Scheme);
        Assert.Equal([new("content-type", "application/grpc"), new("te", "trailers")], first.Fields);
        Assert.Same(KnownHeaderStrings.FindName("content-type"u8), first.Fields[0].Key);
        Assert.Same(KnownHeaderStrings.FindValue("application/grpc"u8), first.Fields[0].Value);
    }

    [Fact]
    public void OnHeader_SameFieldsNextBlock_ReusesStrings()
    {
        var collector = new RequestHeaderCollector(16_384, 100);
        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/x"), (":authority", "h:1"), ("user-agent", "ua/1 é"));
        var path = collector.Path;
        var authority = collector.Authority;
        var agent = collector.Fields[0].Value;

        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/x"), (":authority", "h:1"), ("user-agent", "ua/1 é"));

        Assert.Same(path, collector.Path);
        Assert.Same(authority, collector.Authority);
        Assert.Same(agent, collector.Fields[0].Value);
    }

    [Fact]
    public void OnHeader_ChangedValuesNextBlock_NewExactStrings()
    {
        var collector = new RequestHeaderCollector(16_384, 100);
        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/x"), ("x-a", "one"), ("x-b", "two"));

        // Same lengths, different octets; and fields shifted by one position.
        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/y"), ("x-b", "two"), ("x-a", "ong"));

        Assert.Equal("/y", collector.Path);
        Assert.Equal([new("x-b", "two"), new("x-a", "ong")], collector.Fields);
    }
}
