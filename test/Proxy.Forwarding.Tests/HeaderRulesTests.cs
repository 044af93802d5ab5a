using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Tests;

/// <summary>The hop-by-hop classification every copied field goes through, in any case (end-to-end copies: HeaderTests).</summary>
public class HeaderRulesTests
{
    public static TheoryData<string> Never() =>
        new() { "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "TE", "Trailer", "Host", ":authority", ":path" };

    [Theory]
    [MemberData(nameof(Never))]
    public void IsHopByHop_EachNameInAnyCase_True(string name)
    {
        Assert.True(HeaderRules.IsHopByHop(name));
        Assert.True(HeaderRules.IsHopByHop(name.ToLowerInvariant()));
        Assert.True(HeaderRules.IsHopByHop(name.ToUpperInvariant()));
    }

    [Theory]
    [InlineData("")]
    [InlineData("T")]
    [InlineData("TEx")]
    [InlineData("Hosts")]
    [InlineData("X-Host")]
    [InlineData("Trailers")]
    [InlineData("Upgrade-Insecure-Requests")]
    [InlineData("Connections")]
    [InlineData("Keep-Alivee")]
    [InlineData("Transfer-Encodings")]
    [InlineData("Content-Length")]
    [InlineData("Content-Type")]
    [InlineData("x:y")]
    public void IsHopByHop_OtherNames_False(string name) => Assert.False(HeaderRules.IsHopByHop(name));

    // RFC 9110 §7.6.1: every Connection field's names are hop-by-hop, not only the first field's.
    [Fact]
    public void CopyResponse_TwoConnectionFields_NamesOfBothStayOut()
    {
        KeyValuePair<string, string>[] fields =
        [
            new("Connection", "keep-alive"), new("x-a", "1"), new("Connection", "x-secret"), new("x-secret", "2"), new("x-b", "3"),
        ];
        var dictionary = new Microsoft.AspNetCore.Http.HeaderDictionary();
        var list = new List<KeyValuePair<string, string>>();

        HeaderRules.CopyResponseHeaders(fields, dictionary);
        HeaderRules.CopyResponseFields(fields, list, allowed: null, lowercase: true);

        Assert.Equal(["x-a", "x-b"], dictionary.Keys.Order(StringComparer.Ordinal));
        Assert.Equal(["x-a", "x-b"], list.Select(f => f.Key));
    }

    [Fact]
    public void CopyRequestFromFields_RepeatsJoined_CookiesWithSemicolon_ConnectionListedDropped()
    {
        KeyValuePair<string, string>[] fields =
        [
            new("accept", "a"), new("cookie", "c=1"), new("Connection", "x-hop"), new("x-hop", "h"), new("accept", "b"), new("cookie", "d=2"),
            new("te", "trailers"),
        ];
        var head = new ForwarderRequestHead();

        HeaderRules.CopyRequestHeaders(fields, head);

        Assert.Equal([new("accept", "a, b"), new("cookie", "c=1; d=2"), new("te", "trailers")], head.Headers);
    }

    /// <summary>
    /// The copy skips the name comparisons for fields no other field can share a name with: against the plain rule (every
    /// field compared with every other), on random heads of names that repeat in any case, the result is the same.
    /// </summary>
    [Fact]
    public void CopyRequestFromFields_RandomHeads_SameAsComparingEveryPair()
    {
        string[] names =
        [
            "accept", "Accept", "ACCEPT", "cookie", "Cookie", "x-a", "X-A", "x-b", "user-agent", "content-type", "Content-Length", "te", "TE",
            "connection", "x-hop", "grpc-timeout", "a", "b", "ab", "ba", "abcdefgh", "hgfedcba", "x-forwarded-for",
        ];
        string[] values = ["1", "two", "trailers", "x-hop", "keep-alive, x-a", "gzip"];
        var random = new Random(20261128);
        for (var round = 0; round < 2000; round++)
        {
            var fields = new List<KeyValuePair<string, string>>();
            for (var n = random.Next(0, 14); n > 0; n--)
            {
                fields.Add(new(names[random.Next(names.Length)], values[random.Next(values.Length)]));
            }
            var hasBody = random.Next(2) == 0;
            var head = new ForwarderRequestHead { HasBody = hasBody };

            HeaderRules.CopyRequestHeaders(fields, head);

            Assert.Equal(CopiedComparingEveryPair(fields, hasBody), head.Headers);
        }
    }

    // The rule written plainly: one field per name (any case) in the order names first appear, values joined.
    private static List<KeyValuePair<string, string>> CopiedComparingEveryPair(List<KeyValuePair<string, string>> fields, bool hasBody)
    {
        var listed = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var (name, value) in fields)
        {
            if (name.Equals("connection", StringComparison.OrdinalIgnoreCase))
            {
                foreach (var token in value.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
                {
                    listed.Add(token);
                }
            }
        }
        var copied = new List<KeyValuePair<string, string>>();
        var done = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var (name, _) in fields)
        {
            if (!done.Add(name) || HeaderRules.IsHopByHop(name) || listed.Contains(name)
                || (HeaderRules.IsContentHeader(name) && (!hasBody || name.Equals("content-length", StringComparison.OrdinalIgnoreCase))))
            {
                continue;
            }
            var all = fields.Where(f => f.Key.Equals(name, StringComparison.OrdinalIgnoreCase)).Select(f => f.Value).ToArray();
            copied.Add(new(name, string.Join(name.Equals("cookie", StringComparison.OrdinalIgnoreCase) ? "; " : ", ", all)));
        }
        var te = fields.Where(f => f.Key.Equals("te", StringComparison.OrdinalIgnoreCase)).Select(f => f.Value).ToArray();
        if (te.Length > 0 && !listed.Contains("te") && string.Join(", ", te).Split(',').Any(t => t.Trim().Equals("trailers", StringComparison.OrdinalIgnoreCase)))
        {
            copied.Add(new("te", "trailers"));
        }
        return copied;
    }

    [Theory]
    [InlineData("Allow", true)]
    [InlineData("content-disposition", true)]
    [InlineData("Content-Encoding", true)]
    [InlineData("CONTENT-LANGUAGE", true)]
    [InlineData("Content-Length", true)]
    [InlineData("Content-Location", true)]
    [InlineData("Content-MD5", true)]
    [InlineData("Content-Range", true)]
    [InlineData("content-type", true)]
    [InlineData("Expires", true)]
    [InlineData("Last-Modified", true)]
    [InlineData("Content-Typo", false)]
    [InlineData("Accept", false)]
    [InlineData("Content-Security-Policy", false)]
    [InlineData("", false)]
    public void IsContentHeader_TheContentHeadersOfHttpClient(string name, bool expected) =>
        Assert.Equal(expected, HeaderRules.IsContentHeader(name));
}
