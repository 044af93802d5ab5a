using System.Buffers;
using System.Text;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Server.Features;
using Proxy.Server.Internal;

namespace Proxy.Server.Tests;

public class ParsingTests
{
    [Theory]
    [InlineData("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "Http2")]
    [InlineData("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04", "Http2")]
    [InlineData("PRI * HTTP/2", "NeedMore")]
    [InlineData("", "NeedMore")]
    [InlineData("GET / HTTP/1.1\r\n", "Http1")]
    [InlineData("PRI * HTTP/1.1\r\n", "Http1")]
    public void Check_FirstBytes_Verdict(string bytes, string expected)
        => Assert.Equal(expected, PrefaceDetector.Check(new ReadOnlySequence<byte>(Encoding.ASCII.GetBytes(bytes))).ToString());

    [Theory]
    [InlineData("/", "/", "")]
    [InlineData("/a/b?c=d", "/a/b", "?c=d")]
    [InlineData("/caf%C3%A9", "/café", "")]
    [InlineData("/a%2Fb", "/a%2Fb", "")]
    [InlineData("/a/../../etc/passwd", "/etc/passwd", "")]
    [InlineData("/a/./b/.", "/a/b/", "")]
    [InlineData("/bad%zz", "/bad%zz", "")]
    [InlineData("/bad%FF", "/bad%FF", "")]
    [InlineData("http://example.com/x?y", "/x", "?y")]
    [InlineData("http://example.com", "/", "")]
    [InlineData("*", "", "")]
    public void Split_RequestTarget_PathAndQuery(string target, string path, string query)
        => Assert.Equal((path, query), RequestTarget.Split(target));

    [Theory]
    [InlineData("/grpc.testing.BenchmarkService/UnaryCall", true)]
    [InlineData("/a/b?c=d", false)]
    [InlineData("/caf%C3%A9", false)]
    [InlineData("/a/./b", false)]
    public void Split_PlainOriginTarget_IsItsOwnPath(string target, bool same)
    {
        // Built at run time, so the target is not an interned literal the test's expected value could share.
        var raw = new string(target.AsSpan());
        var (path, _) = RequestTarget.Split(raw);
        Assert.Equal(same, ReferenceEquals(raw, path));
    }

    [Theory]
    [InlineData("http://127.0.0.1:0", "127.0.0.1", 0, false)]
    [InlineData("https://[::1]:5001", "::1", 5001, true)]
    [InlineData("http://localhost:5000", "127.0.0.1", 5000, false)]
    public void Parse_Url_Endpoint(string url, string address, int port, bool https)
    {
        var endpoint = EndpointResolver.Parse(url, NullLogger.Instance);
        Assert.Equal(System.Net.IPAddress.Parse(address), endpoint.EndPoint.Address);
        Assert.Equal(port, endpoint.EndPoint.Port);
        Assert.Equal(https, endpoint.IsTls);
    }

    [Fact]
    public void Parse_Wildcard_BindsAllInterfaces()
    {
        var endpoint = EndpointResolver.Parse("http://*:8080", NullLogger.Instance);
        Assert.True(endpoint.EndPoint.Address.Equals(System.Net.IPAddress.IPv6Any) || endpoint.EndPoint.Address.Equals(System.Net.IPAddress.Any));
    }

    [Theory]
    [InlineData("http://127.0.0.1:70000", "port 70000 is out of range (0-65535)")]
    [InlineData("http://127.0.0.1:http", "port 'http' is not a number")]
    [InlineData("https://[::1]:x", "port 'x' is not a number")]
    [InlineData("http://", "not a valid URL")]
    public void Parse_BadPort_ErrorNamesUrlAndSource(string url, string reason)
    {
        var error = Assert.Throws<InvalidOperationException>(() => EndpointResolver.Parse(url, NullLogger.Instance));
        Assert.Contains($"Listen URL '{url}' (from --urls, ASPNETCORE_URLS or the 'urls' setting)", error.Message);
        Assert.Contains(reason, error.Message);
    }
}
