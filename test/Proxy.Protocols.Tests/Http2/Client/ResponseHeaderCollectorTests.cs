using System.Text;
using Proxy.Protocols.Http2.Client;

namespace Proxy.Protocols.Tests.Http2.Client;

/// <summary>
/// The client's response collector reuses the previous response head's strings (backends repeat their fields in the
/// same order); its lists are swapped, not copied, between heads, so each block must still see exactly its own fields.
/// </summary>
public class ResponseHeaderCollectorTests
{
    private const string Date1 = "Wed, 02 Dec 2026 18:00:00 GMT";
    private const string Date2 = "Wed, 02 Dec 2026 18:00:01 GMT";

    private static List<KeyValuePair<string, string>> Collect(ResponseHeaderCollector collector, bool trailers, params (string Name, string Value)[] fields)
    {
        collector.Reset(trailers);
        if (!trailers)
        {
            collector.OnHeader(":status"u8, "200"u8);
        }
        foreach (var (name, value) in fields)
        {
            collector.OnHeader(Encoding.Latin1.GetBytes(name), Encoding.Latin1.GetBytes(value));
        }
        collector.ValidateResponseComplete();
        Assert.Null(collector.MalformedToken);
        return [.. collector.Fields]; // what the stream keeps: a copy
    }

    [Fact]
    public void NextHead_SameFieldAtSamePosition_ReusesTheString_AnotherValueIsNew()
    {
        var collector = new ResponseHeaderCollector(16_384, 100);
        var first = Collect(collector, trailers: false, ("date", Date1), ("x-trace", "abc"));
        var second = Collect(collector, trailers: false, ("date", Date1), ("x-trace", "abd"));

        Assert.Same(first[0].Value, second[0].Value);
        Assert.Equal("abd", second[1].Value);
        Assert.NotSame(first[1].Value, second[1].Value);
    }

    [Fact]
    public void Heads_OfDifferentLengths_EachSeesExactlyItsOwnFields()
    {
        var collector = new ResponseHeaderCollector(16_384, 100);
        Collect(collector, trailers: false, ("date", Date1), ("x-a", "1"), ("x-b", "2"), ("x-c", "3"));
        var shorter = Collect(collector, trailers: false, ("date", Date2));
        var longer = Collect(collector, trailers: false, ("date", Date2), ("x-a", "1"), ("x-b", "2"));

        Assert.Equal([new("date", Date2)], shorter);
        Assert.Equal([new("date", Date2), new("x-a", "1"), new("x-b", "2")], longer);
        Assert.Same(shorter[0].Value, longer[0].Value); // the previous head is the one just before, not two before
    }

    [Fact]
    public void Trailers_BetweenHeads_AreNotThePreviousHead()
    {
        var collector = new ResponseHeaderCollector(16_384, 100);
        var head = Collect(collector, trailers: false, ("date", Date1), ("grpc-encoding", "identity"));
        var trailers = Collect(collector, trailers: true, ("grpc-status", "0"), ("x-t", "t"));
        var next = Collect(collector, trailers: false, ("date", Date1), ("grpc-encoding", "identity"));

        Assert.Equal([new("grpc-status", "0"), new("x-t", "t")], trailers);
        Assert.Equal(head, next);
        Assert.Same(head[0].Value, next[0].Value);
    }
}
