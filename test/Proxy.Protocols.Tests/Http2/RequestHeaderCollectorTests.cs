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
        var first = Collect(new RequestHeaderCollector(16_384, 100, "https", allowAlternateSchemes: false),
            (":method", "POST"), (":scheme", "https"), (":authority", "h"), (":path", "/a"), ("content-type", "application/grpc"), ("te", "trailers"));

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
        var collector = new RequestHeaderCollector(16_384, 100, "http", allowAlternateSchemes: false);
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
        var collector = new RequestHeaderCollector(16_384, 100, "http", allowAlternateSchemes: false);
        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/x"), ("host", "h"), ("x-a", "one"), ("x-b", "two"));

        // Same lengths, different octets; and fields shifted by one position.
        Collect(collector, (":method", "GET"), (":scheme", "http"), (":path", "/y"), ("host", "h"), ("x-b", "two"), ("x-a", "ong"));

        Assert.Equal("/y", collector.Path);
        Assert.Equal([new("host", "h"), new("x-b", "two"), new("x-a", "ong")], collector.Fields);
    }

    [Fact]
    public void ValidateRequestComplete_HostDiffersFromAuthority_HostReplacedByAuthority()
    {
        var collector = Collect(new RequestHeaderCollector(16_384, 100, "http", allowAlternateSchemes: false),
            (":method", "GET"), (":scheme", "http"), (":authority", "served.example"), (":path", "/"), ("x-a", "1"), ("host", "evil.example"));

        Assert.Null(collector.MalformedToken);
        Assert.Equal("served.example", collector.Authority);
        Assert.Equal("served.example", collector.Host);
        Assert.Equal([new("x-a", "1"), new("host", "served.example")], collector.Fields);
    }

    [Theory]
    [InlineData("https", "https", false, null)]
    [InlineData("HTTPS", "https", false, null)]
    [InlineData("http", "https", false, "scheme_mismatch")]
    [InlineData("https", "http", false, "scheme_mismatch")]
    [InlineData("https", "http", true, null)]
    [InlineData("grpc+x.y-z", "http", true, null)]
    [InlineData("http://x", "http", true, "invalid_scheme")]
    [InlineData("1http", "http", true, "invalid_scheme")]
    public void ValidateRequestComplete_Scheme_CheckedAgainstConnection(string scheme, string connectionScheme, bool allowAlternates, string? token)
    {
        var collector = Collect(new RequestHeaderCollector(16_384, 100, connectionScheme, allowAlternates),
            (":method", "GET"), (":scheme", scheme), (":authority", "h"), (":path", "/"));

        Assert.Equal(token, collector.MalformedToken);
        if (token is null)
        {
            // The app sees the connection's own string when they match, else the accepted alternate.
            Assert.Equal(string.Equals(scheme, connectionScheme, StringComparison.OrdinalIgnoreCase) ? connectionScheme : scheme, collector.Scheme);
        }
    }

    [Fact]
    public void LowercaseName_KnownNameInterned_LowercaseKept_OtherLowered()
    {
        Assert.Same(KnownHeaderStrings.FindName("x-forwarded-for"u8), KnownHeaderStrings.LowercaseName("X-Forwarded-For"));
        var lower = "x-custom";
        Assert.Same(lower, KnownHeaderStrings.LowercaseName(lower));
        Assert.Equal("x-custom-name", KnownHeaderStrings.LowercaseName("X-Custom-Name"));
        Assert.Equal("x-" + new string('a', 300), KnownHeaderStrings.LowercaseName("X-" + new string('A', 300)));
    }

    [Fact]
    public void LowercaseName_SameStringAgain_SameLoweredString_EqualButOtherStringLoweredOnItsOwn()
    {
        var name = new string("X-Custom-Name".AsSpan()); // not interned: only this object is the cache's key
        var first = KnownHeaderStrings.LowercaseName(name);
        Assert.Equal("x-custom-name", first);
        Assert.Same(first, KnownHeaderStrings.LowercaseName(name)); // remembered, not lowered into a new string again

        var other = new string("X-Custom-Name".AsSpan());
        var second = KnownHeaderStrings.LowercaseName(other);
        Assert.Equal("x-custom-name", second);
        Assert.NotSame(first, second); // equal content, another object: lowered on its own

        // More names than the cache holds: each still comes out right.
        for (var i = 0; i < 20; i++)
        {
            Assert.Equal("x-n" + i, KnownHeaderStrings.LowercaseName("X-N" + i));
        }
        Assert.Equal("x-custom-name", KnownHeaderStrings.LowercaseName(name));
    }
}
