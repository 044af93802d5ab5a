using System.Net.Security;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class SniCertificateMapTests
{
    private static SslStreamCertificateContext Context(string name)
    {
        return SslStreamCertificateContext.Create(Proxy.Testing.ThrowawayCertificates.Create(name), null, offline: true);
    }

    private static readonly SslStreamCertificateContext Exact = Context("exact");
    private static readonly SslStreamCertificateContext Wide = Context("wide");
    private static readonly SslStreamCertificateContext Narrow = Context("narrow");
    private static readonly SslStreamCertificateContext Star = Context("star");
    private static readonly SslStreamCertificateContext Endpoint = Context("endpoint");

    private static KeyValuePair<string, Func<SslStreamCertificateContext>> Entry(string host, SslStreamCertificateContext context) => new(host, () => context);

    [Theory]
    [InlineData("a.example.com", "exact")]
    [InlineData("A.EXAMPLE.COM", "exact")]
    [InlineData("b.example.com", "wide")]
    [InlineData("x.api.example.com", "narrow")]
    [InlineData("example.com", "star")]
    [InlineData(null, "star")]
    public void Select_ExactThenLongestWildcardThenStar(string? name, string expected)
    {
        var map = new SniCertificateMap(
            [Entry("a.example.com", Exact), Entry("*.example.com", Wide), Entry("*.api.example.com", Narrow), Entry("*", Star)], () => Endpoint);

        Assert.Equal("CN=" + expected, map.Select(name)!.TargetCertificate.Subject);
    }

    [Fact]
    public void Select_NoMatch_EndpointCertificateOrRefused()
    {
        Assert.Same(Endpoint, new SniCertificateMap([Entry("a.example.com", Exact)], () => Endpoint).Select("other.test"));
        Assert.Null(new SniCertificateMap([Entry("a.example.com", Exact)], fallback: null).Select("other.test"));
        Assert.Null(new SniCertificateMap([Entry("*.example.com", Wide)], fallback: null).Select("example.com"));
    }
}
