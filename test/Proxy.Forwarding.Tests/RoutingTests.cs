using System.Net;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>Each route adds an X-Route request header; the echo backend tells us which route matched.</summary>
public class RoutingTests : IAsyncLifetime
{
    private TestApp _backend = null!;
    private TestApp _proxy = null!;
    private HttpClient _http = null!;

    public async Task InitializeAsync()
    {
        _backend = await Backends.StartEchoAsync();
        var config = new ProxyConfigDictionary().Destination("c1", "d1", _backend.Url);
        void Route(string id, params (string Key, string Value)[] match)
        {
            config.Route(id, "c1", path: null);
            config.Set($"Routes:{id}:Transforms:0:RequestHeader", "X-Route").Set($"Routes:{id}:Transforms:0:Set", id);
            foreach (var (key, value) in match)
            {
                config.Set($"Routes:{id}:{key}", value);
            }
        }

        Route("fallback", ("Match:Path", "/{**catch-all}"), ("Order", "100"));
        Route("api", ("Match:Path", "/api/{**rest}"));
        Route("prefix", ("Match:PathPrefix", "/static"));
        Route("host", ("Match:Path", "/{**catch-all}"), ("Match:Hosts:0", "*.tenant.test"), ("Order", "10"));
        Route("post", ("Match:Path", "/form"), ("Match:Methods:0", "POST"));
        Route("header", ("Match:Path", "/api/{**rest}"), ("Match:Headers:0:Name", "x-version"), ("Match:Headers:0:Values:0", "2"));
        Route("headerprefix", ("Match:Path", "/api/{**rest}"), ("Match:Headers:0:Name", "x-client"),
            ("Match:Headers:0:Values:0", "mobile-"), ("Match:Headers:0:Mode", "HeaderPrefix"));
        Route("query", ("Match:Path", "/search"), ("Match:QueryParameters:0:Name", "beta"), ("Match:QueryParameters:0:Mode", "Exists"));
        Route("queryexact", ("Match:Path", "/search"), ("Match:QueryParameters:0:Name", "lang"), ("Match:QueryParameters:0:Values:0", "fr"));
        _proxy = await Proxies.StartConfiguredAsync(config);
        _http = _proxy.CreateClient();
    }

    public async Task DisposeAsync()
    {
        _http.Dispose();
        await _proxy.DisposeAsync();
        await _backend.DisposeAsync();
    }

    private async Task<string> RouteFor(HttpMethod method, string path, params (string Name, string Value)[] headers)
    {
        using var request = new HttpRequestMessage(method, path);
        foreach (var (name, value) in headers)
        {
            request.Headers.TryAddWithoutValidation(name, value);
        }

        using var response = await _http.SendAsync(request);
        return (await response.ReadEchoAsync()).Headers["x-route"];
    }

    [Theory]
    [InlineData("/api/users", "api")]
    [InlineData("/api", "api")]
    [InlineData("/other", "fallback")]
    [InlineData("/static", "prefix")]
    [InlineData("/static/css/site.css", "prefix")]
    [InlineData("/staticx", "fallback")]
    public async Task Path_TemplatesAndPrefixes_MostSpecificRouteWins(string path, string expected)
    {
        Assert.Equal(expected, await RouteFor(HttpMethod.Get, path));
    }

    [Fact]
    public async Task Hosts_WildcardHost_MatchesBeforeFallback()
    {
        Assert.Equal("host", await RouteFor(HttpMethod.Get, "/x", ("Host", "a.tenant.test")));
        Assert.Equal("fallback", await RouteFor(HttpMethod.Get, "/x", ("Host", "other.test")));
    }

    [Fact]
    public async Task Methods_OnlyListedMethodMatches()
    {
        Assert.Equal("post", await RouteFor(HttpMethod.Post, "/form"));
        Assert.Equal("fallback", await RouteFor(HttpMethod.Get, "/form"));
    }

    [Fact]
    public async Task Headers_MatchingHeaderRouteBeatsSamePathWithout()
    {
        Assert.Equal("header", await RouteFor(HttpMethod.Get, "/api/x", ("x-version", "2")));
        Assert.Equal("api", await RouteFor(HttpMethod.Get, "/api/x", ("x-version", "3")));
        Assert.Equal("headerprefix", await RouteFor(HttpMethod.Get, "/api/x", ("x-client", "Mobile-ios")));
    }

    [Fact]
    public async Task QueryParameters_ExistsAndExact()
    {
        Assert.Equal("query", await RouteFor(HttpMethod.Get, "/search?beta"));
        Assert.Equal("queryexact", await RouteFor(HttpMethod.Get, "/search?lang=FR"));
        Assert.Equal("fallback", await RouteFor(HttpMethod.Get, "/search?lang=de"));
    }

    [Fact]
    public async Task NoRouteMatches_404FromTheHost()
    {
        await using var proxy = await Proxies.StartConfiguredAsync(
            new ProxyConfigDictionary().Route("r1", "c1", "/only").Destination("c1", "d1", _backend.Url));
        using var http = proxy.CreateClient();

        Assert.Equal(HttpStatusCode.NotFound, (await http.GetAsync("/else")).StatusCode);
    }
}
