using System.Text;
using Proxy.Codecs.Http1;

namespace Proxy.Codecs.Tests.Http1;

public class Http1RequestTargetTests
{
    [Theory]
    [InlineData("http://a.example:8080/x?y", "a.example:8080", "/x?y")]
    [InlineData("http://a.example", "a.example", "")]
    [InlineData("http://a.example?q", "a.example", "?q")]
    [InlineData("https://user@a.example/p#frag", "user@a.example", "/p")]
    public void SplitAbsolute_Target_AuthorityAndPath(string target, string authority, string path)
    {
        Http1RequestTarget.SplitAbsolute(Encoding.ASCII.GetBytes(target), out var a, out var p);
        Assert.Equal(authority, Encoding.ASCII.GetString(a));
        Assert.Equal(path, Encoding.ASCII.GetString(p));
    }

    [Theory]
    [InlineData("example.com:443", true)]
    [InlineData("[::1]:443", true)]
    [InlineData("example.com", false)]
    [InlineData("example.com:", false)]
    [InlineData("user@example.com:443", false)]
    [InlineData("example.com:44a", false)]
    public void IsAuthorityForm_Target_Classified(string target, bool expected)
    {
        Assert.Equal(expected, Http1RequestTarget.IsAuthorityForm(Encoding.ASCII.GetBytes(target)));
    }
}
