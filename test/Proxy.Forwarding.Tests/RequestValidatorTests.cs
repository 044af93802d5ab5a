using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Forwarder;

namespace Proxy.Forwarding.Tests;

public class RequestValidatorTests
{
    private static DefaultHttpContext Context(string method = "GET", string rawTarget = "/a%20b?q=1", params (string Name, string Value)[] headers)
    {
        var context = new DefaultHttpContext();
        context.Request.Method = method;
        context.Request.Scheme = "http";
        context.Features.Get<IHttpRequestFeature>()!.RawTarget = rawTarget;
        foreach (var (name, value) in headers)
        {
            context.Request.Headers.Append(name, value);
        }

        return context;
    }

    [Fact]
    public void FindMalformation_WellFormedRequest_Null()
    {
        Assert.Null(RequestValidator.FindMalformation(Context(headers: [("x-a", "1"), ("Accept", "text/event-stream"), ("x-inner", "a b")])));
    }

    [Theory]
    [InlineData("GET /x", "/", "invalid method")]
    [InlineData("GET", "/a b", "invalid character in the request target")]
    [InlineData("GET", "/a\u00e9", "invalid character in the request target")]
    [InlineData("GET", "/a\tb", "invalid character in the request target")]
    public void FindMalformation_BadMethodOrTarget_Reason(string method, string target, string reason)
    {
        Assert.Equal(reason, RequestValidator.FindMalformation(Context(method, target)));
    }

    [Theory]
    [InlineData("x-value", " leading")]
    [InlineData("x-value", "trailing\t")]
    [InlineData("x-value", "a\r\nInjected: 1")]
    [InlineData("x-value", "nul\0")]
    public void FindMalformation_BadHeaderValue_NamesTheHeader(string name, string value)
    {
        Assert.Equal($"invalid value in header '{name}'", RequestValidator.FindMalformation(Context(headers: [(name, value)])));
    }

    [Fact]
    public void FindMalformation_HeaderNameWithSpace_Reason()
    {
        Assert.Equal("invalid header name", RequestValidator.FindMalformation(Context(headers: [("bad name", "1")])));
    }

    [Theory]
    [InlineData("example.com")]
    [InlineData("example.com:8080")]
    [InlineData("[::1]:443")]
    public void FindMalformation_ValidHost_Null(string host)
    {
        Assert.Null(RequestValidator.FindMalformation(Context(headers: [("Host", host)])));
    }

    [Theory]
    [InlineData("user@example.com", "userinfo in the authority")]
    [InlineData("user:pw@example.com:80", "userinfo in the authority")]
    [InlineData("exa mple.com", "invalid Host header")]
    [InlineData("example.com/path", "invalid Host header")]
    public void FindMalformation_BadHost_Reason(string host, string reason)
    {
        Assert.Equal(reason, RequestValidator.FindMalformation(Context(headers: [("Host", host)])));
    }

    [Fact]
    public void FindMalformation_TwoHostHeaders_Reason()
    {
        Assert.Equal("more than one Host header", RequestValidator.FindMalformation(Context(headers: [("Host", "a.example"), ("Host", "b.example")])));
    }

    [Fact]
    public void FindMalformation_HostDiffersFromVisibleAuthority_Reason()
    {
        Assert.Equal("Host header differs from :authority",
            RequestValidator.FindMalformation(Context(headers: [(":authority", "served.example"), ("Host", "evil.example")])));
        Assert.Null(RequestValidator.FindMalformation(Context(headers: [(":authority", "served.example"), ("Host", "Served.Example")])));
    }

    [Theory]
    [InlineData("http://x")]
    [InlineData("")]
    [InlineData("1http")]
    [InlineData("ht tp")]
    public void FindMalformation_InvalidScheme_Reason(string scheme)
    {
        var context = Context();
        context.Request.Scheme = scheme;
        Assert.Equal("invalid scheme", RequestValidator.FindMalformation(context));
    }

    [Theory]
    [InlineData("https")]
    [InlineData("grpc+x.y-z")]
    public void FindMalformation_ValidScheme_Null(string scheme)
    {
        var context = Context();
        context.Request.Scheme = scheme;
        Assert.Null(RequestValidator.FindMalformation(context));
    }

    [Theory]
    [InlineData("http://served.example/a", "served.example", null)]
    [InlineData("http://served.example/a", "SERVED.example:80", null)]
    [InlineData("https://served.example:443/a", "served.example", null)]
    [InlineData("http://served.example/a", "evil.example", "Host header differs from the request target's authority")]
    [InlineData("http://served.example:8080/a", "served.example", "Host header differs from the request target's authority")]
    [InlineData("http://user@served.example/a", "served.example", "userinfo in the authority")]
    public void FindMalformation_AbsoluteTarget_HostMustNameItsAuthority(string target, string host, string? reason)
    {
        Assert.Equal(reason, RequestValidator.FindMalformation(Context(rawTarget: target, headers: [("Host", host)])));
    }

    [Theory]
    [InlineData("HTTP/2", null, "missing or empty :authority")]
    [InlineData("HTTP/2", "", "missing or empty :authority")]
    [InlineData("HTTP/2", "h.example", null)]
    [InlineData("HTTP/1.0", null, null)]
    [InlineData("HTTP/1.1", "", null)]
    public void FindMalformation_NoAuthority_RefusedOnHttp2Only(string protocol, string? host, string? reason)
    {
        var context = host is null ? Context() : Context(headers: [("Host", host)]);
        context.Request.Protocol = protocol;
        Assert.Equal(reason, RequestValidator.FindMalformation(context));
    }
}
