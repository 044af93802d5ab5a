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
}
