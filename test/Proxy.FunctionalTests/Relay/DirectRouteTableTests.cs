using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Patterns;
using Microsoft.AspNetCore.Routing.Template;
using Proxy.Relay.Direct;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// The direct path's route table skips ASP.NET Core's template matcher for paths that cannot start with a route's literal
/// segments. That is only right if the check never refuses a path the matcher would take: here the matcher is the judge.
/// </summary>
public class DirectRouteTableTests
{
    public static readonly string[] Patterns =
    [
        "/proxy.interop.Echo/{**rest}", "/a/{**rest}", "/a/b/{id}", "/{**catch-all}", "/a-{x}/b", "/api/v1/items/{id?}", "/a/b",
        "/a/{*rest}", "/a/b/{**rest=x}", "/a/{**rest:int}", "/{x}/{**rest}", "/a-{x}/{**rest}",
    ];

    private static readonly string[] Paths =
    [
        "/", "/a", "/A", "/a/", "/a/b", "/A/B", "/a/b/", "/a/b/c", "/ab", "/a.b", "/b/a", "//a/b", "/a//b", "/a/b/c/d",
        "/proxy.interop.Echo/UnaryCall", "/PROXY.INTEROP.ECHO/x", "/proxy.interop.Echo", "/proxy.interop.Echox/y", "/proxy.interop",
        "/api/v1/items", "/api/v1/items/7", "/API/V1/ITEMS/7/", "/api/v1/itemsx", "/a-1/b", "/a-/b",
        "/a/7", "/a/b/7", "/a/b//", "/a/%2F", "/a/b%2Fc", "/\u00e9/a", "/a/\u00e9", "/a/b/c//d", "/a///", "/a/b/", "/a/b//c",
    ];

    [Theory]
    [MemberData(nameof(PatternData))]
    public void LiteralPrefix_NeverRefusesAPathTheMatcherTakes(string pattern)
    {
        var parsed = RoutePatternFactory.Parse(pattern);
        var matcher = new TemplateMatcher(new RouteTemplate(parsed), new RouteValueDictionary(parsed.Defaults));
        var prefix = DirectRouteTable.LiteralPrefix(parsed);
        foreach (var path in Paths)
        {
            var values = new RouteValueDictionary();
            if (matcher.TryMatch(new Microsoft.AspNetCore.Http.PathString(path), values))
            {
                Assert.True(DirectRouteTable.PrefixAllows(prefix, path), $"'{path}' matches '{pattern}' but the prefix '{prefix}' refused it");
            }
        }
    }

    public static TheoryData<string> PatternData() => new(Patterns);

    /// <summary>Where the prefix is said to decide the match, the catch-all check gives the matcher's answer for every path.</summary>
    [Theory]
    [MemberData(nameof(PatternData))]
    public void PrefixDecides_OnlyWhereThePrefixGivesTheMatchersAnswer(string pattern)
    {
        var parsed = RoutePatternFactory.Parse(pattern);
        if (!DirectRouteTable.PrefixDecides(parsed))
        {
            return;
        }
        var matcher = new TemplateMatcher(new RouteTemplate(parsed), new RouteValueDictionary(parsed.Defaults));
        var prefix = DirectRouteTable.LiteralPrefix(parsed);
        foreach (var path in Paths)
        {
            var matched = matcher.TryMatch(new Microsoft.AspNetCore.Http.PathString(path), new RouteValueDictionary());
            Assert.True(matched == DirectRouteTable.CatchAllTakes(prefix, path), $"'{path}' against '{pattern}': the matcher says {matched}");
        }
    }

    [Fact]
    public void PrefixDecides_LiteralsThenACatchAllOnly()
    {
        Assert.True(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/proxy.interop.Echo/{**rest}")));
        Assert.True(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/{**catch-all}")));
        Assert.True(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/a/b/{*rest}")));
        Assert.False(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/a/{**rest:int}")));
        Assert.False(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/a/b")));
        Assert.False(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/a/b/{id}")));
        Assert.False(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/{x}/{**rest}")));
        Assert.False(DirectRouteTable.PrefixDecides(RoutePatternFactory.Parse("/a-{x}/{**rest}")));
    }

    [Fact]
    public void LiteralPrefix_RefusesPathsOutsideIt()
    {
        var prefix = DirectRouteTable.LiteralPrefix(RoutePatternFactory.Parse("/proxy.interop.Echo/{**rest}"));
        Assert.Equal("/proxy.interop.Echo", prefix);
        Assert.False(DirectRouteTable.PrefixAllows(prefix, "/grpc.testing.BenchmarkService/UnaryCall"));
        Assert.False(DirectRouteTable.PrefixAllows(prefix, "/proxy.interop.Echox/y"));
        Assert.True(DirectRouteTable.PrefixAllows(prefix, "/PROXY.interop.echo/y"));
        Assert.Null(DirectRouteTable.LiteralPrefix(RoutePatternFactory.Parse("/{**catch-all}")));
        Assert.Equal("/api/v1/items", DirectRouteTable.LiteralPrefix(RoutePatternFactory.Parse("/api/v1/items/{id?}")));
    }
}
