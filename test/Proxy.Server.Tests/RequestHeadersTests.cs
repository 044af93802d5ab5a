using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;
using Proxy.Server.Features;

namespace Proxy.Server.Tests;

/// <summary>
/// The request headers read from the exchange's field list answer every read as a HeaderDictionary filled from the same
/// fields does (repeated fields combined, cookie crumbs joined, :authority as Host), and the first change switches to a
/// dictionary copy without losing anything.
/// </summary>
public class RequestHeadersTests
{
    public static TheoryData<string, string, string> FieldLists => new()
    {
        // fields as name=value lines, the authority, a description
        { "", "", "no fields" },
        { "accept=text/html\nuser-agent=curl", "", "distinct fields" },
        { "accept=a\naccept=b\nx-one=1\nACCEPT=c", "", "a repeated field, one in another case" },
        { "cookie=a=1\ncookie=b=2\ncookie=c=3", "example.com", "cookie crumbs" },
        { "host=h1.example\nx=1", "authority.example", "a Host field wins over :authority" },
        { "x=1", "authority.example:8443", ":authority as Host" },
        { "content-length= 42 ", "", "a content-length with spaces" },
        { "content-length=4x", "", "a content-length that is no number" },
        { "content-length=1\ncontent-length=1", "", "a repeated content-length" },
        { "te=trailers\nempty=\nempty=v", "", "empty values" },
        // Past RequestHeaders.MaxScannedFields the dictionary serves from the start (no square-cost scans).
        { string.Join("\n", Enumerable.Range(0, RequestHeaders.MaxScannedFields + 8).Select(i => $"x-{i % 30}={i}")) + "\ncookie=a\ncookie=b", "long.example", "a long list with repeats" },
    };

    [Theory]
    [MemberData(nameof(FieldLists))]
    public void Reads_AsAHeaderDictionaryFilledFromTheSameFields(string lines, string authority, string description)
    {
        var (headers, reference) = Build(lines, authority);

        Assert.True(reference.Count == headers.Count, description + ": Count");
        Assert.Equal(reference.ToList(), headers.ToList());
        Assert.Equal(reference.ContentLength, headers.ContentLength);
        foreach (var name in reference.Keys.Concat(["Host", "HOST", "Cookie", "Accept", "absent", "content-length"]))
        {
            Assert.Equal(reference.ContainsKey(name), headers.ContainsKey(name));
            Assert.Equal(reference.TryGetValue(name, out var expected), headers.TryGetValue(name, out var actual));
            Assert.Equal(expected, actual);
            Assert.Equal(reference[name], headers[name]);
        }
        Assert.Equal(reference.Host, headers.Host);
        Assert.Equal(reference.Cookie, headers.Cookie);
        var array = new KeyValuePair<string, StringValues>[headers.Count + 1];
        headers.CopyTo(array, 1);
        Assert.Equal(reference.ToList(), array.Skip(1));
    }

    [Fact]
    public void FirstChange_CopiesTheFields_ThenServesTheChanges()
    {
        var (headers, _) = Build("accept=a\naccept=b\nx-remove=1", "example.com");

        headers["X-Added"] = "new";
        Assert.Equal(new StringValues(["a", "b"]), headers["accept"]);
        Assert.Equal("example.com", headers.Host);
        Assert.Equal("new", headers["x-added"]);

        Assert.True(headers.Remove("X-REMOVE"));
        Assert.False(headers.ContainsKey("x-remove"));
        headers.ContentLength = 10;
        Assert.Equal(10, headers.ContentLength);
        Assert.Equal(["Content-Length", "Host", "X-Added", "accept"], headers.Keys.Order(StringComparer.Ordinal));
    }

    [Fact]
    public void Reset_ForTheNextRequest_DropsTheChangesOfThePrevious()
    {
        var headers = new RequestHeaders();
        IHeaderDictionary view = headers;
        var first = new FakeExchange(authority: "one.example") { Connection = FakeExchange.Plain() };
        first.AddRequestHeader("x-first", "1");
        headers.Reset(first);
        headers.Clear();
        Assert.Empty(headers);

        var second = new FakeExchange(authority: "two.example") { Connection = FakeExchange.Plain() };
        second.AddRequestHeader("x-second", "2");
        headers.Reset(second);

        Assert.Equal(2, headers.Count);
        Assert.Equal("2", headers["x-second"]);
        Assert.Equal("two.example", view.Host);
        Assert.False(headers.ContainsKey("x-first"));
    }

    private static (IHeaderDictionary Headers, IHeaderDictionary Reference) Build(string lines, string authority)
    {
        var exchange = new FakeExchange(authority: authority) { Connection = FakeExchange.Plain() };
        var reference = new HeaderDictionary();
        foreach (var line in lines.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            var (name, value) = (line[..line.IndexOf('=')], line[(line.IndexOf('=') + 1)..]);
            exchange.AddRequestHeader(name, value);
            // What the server filled per request before: repeated fields combined, cookie crumbs joined with "; ".
            if (reference.TryGetValue(name, out var existing))
            {
                reference[name] = string.Equals(name, "cookie", StringComparison.OrdinalIgnoreCase)
                    ? new StringValues(existing + "; " + value)
                    : StringValues.Concat(existing, value);
            }
            else
            {
                reference[name] = value;
            }
        }
        if (authority.Length > 0 && !reference.ContainsKey("Host"))
        {
            reference["Host"] = authority;
        }
        var headers = new RequestHeaders();
        headers.Reset(exchange);
        return (headers, reference);
    }
}
