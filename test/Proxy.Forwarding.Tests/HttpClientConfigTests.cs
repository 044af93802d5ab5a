using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>Reading and checking YARP's HttpClient and HttpRequest keys.</summary>
public class HttpClientConfigTests
{
    private static (ProxyConfig Config, List<string> Errors) Read(ProxyConfigDictionary values, bool nativeAvailable = false) =>
        ConfigCheck.Read(values, nativeAvailable);

    private static ProxyConfigDictionary Valid() => ConfigCheck.Valid();

    [Fact]
    public void Read_YarpHttpClientAndHttpRequestKeys_BindsEveryField()
    {
        var (config, errors) = Read(Valid()
            .Set("Clusters:c1:HttpClient:SslProtocols:0", "Tls12")
            .Set("Clusters:c1:HttpClient:SslProtocols:1", "Tls13")
            .Set("Clusters:c1:HttpClient:RequestHeaderEncoding", "utf-8")
            .Set("Clusters:c1:HttpClient:ResponseHeaderEncoding", "latin1")
            .Set("Clusters:c1:HttpClient:WebProxy:Address", "http://proxy.local:3128")
            .Set("Clusters:c1:HttpClient:WebProxy:BypassOnLocal", "true")
            .Set("Clusters:c1:HttpClient:WebProxy:UseDefaultCredentials", "false")
            .Set("Clusters:c1:HttpRequest:AllowResponseBuffering", "true"));

        Assert.Empty(errors);
        var client = config.Clusters.Single().HttpClient!;
        Assert.Equal(System.Security.Authentication.SslProtocols.Tls12 | System.Security.Authentication.SslProtocols.Tls13, client.SslProtocols);
        Assert.Equal("utf-8", client.RequestHeaderEncoding);
        Assert.Equal("latin1", client.ResponseHeaderEncoding);
        Assert.Equal(new Uri("http://proxy.local:3128"), client.WebProxy!.Address);
        Assert.True(client.WebProxy.BypassOnLocal);
        Assert.False(client.WebProxy.UseDefaultCredentials);
        Assert.True(config.Clusters.Single().HttpRequest!.AllowResponseBuffering);
    }

    [Fact]
    public void Read_SslProtocolsAsOneString_Accepted()
    {
        var (config, errors) = Read(Valid().Set("Clusters:c1:HttpClient:SslProtocols", "Tls12, Tls13"));
        Assert.Empty(errors);
        Assert.Equal(System.Security.Authentication.SslProtocols.Tls12 | System.Security.Authentication.SslProtocols.Tls13,
            config.Clusters.Single().HttpClient!.SslProtocols);
    }

    [Theory]
    [InlineData("Clusters:c1:HttpClient:SslProtocols:0", "Tls14", "ReverseProxy:Clusters:c1:HttpClient:SslProtocols:0: 'Tls14' is not one of Tls12, Tls13")]
    [InlineData("Clusters:c1:HttpClient:SslProtocols", "12", "ReverseProxy:Clusters:c1:HttpClient:SslProtocols: '12' is not one of")]
    [InlineData("Clusters:c1:HttpClient:RequestHeaderEncoding", "klingon", "ReverseProxy:Clusters:c1:HttpClient:RequestHeaderEncoding: 'klingon' is not a known encoding")]
    [InlineData("Clusters:c1:HttpClient:ResponseHeaderEncoding", "x", "ReverseProxy:Clusters:c1:HttpClient:ResponseHeaderEncoding: 'x' is not a known encoding")]
    [InlineData("Clusters:c1:HttpClient:WebProxy:Address", "proxy:3128", "ReverseProxy:Clusters:c1:HttpClient:WebProxy:Address: 'proxy:3128' is not an absolute")]
    [InlineData("Clusters:c1:HttpClient:WebProxy:BypassOnLocal", "yes", "ReverseProxy:Clusters:c1:HttpClient:WebProxy:Address: required.")]
    [InlineData("Clusters:c1:HttpRequest:AllowResponseBuffering", "sometimes", "ReverseProxy:Clusters:c1:HttpRequest:AllowResponseBuffering: 'sometimes' is not 'true' or 'false'")]
    public void Validate_BadValue_ErrorNamesTheKey(string key, string value, string expected)
    {
        var (_, errors) = Read(Valid().Set(key, value));
        Assert.Contains(errors, e => e.StartsWith(expected, StringComparison.Ordinal));
    }

    [Theory]
    [InlineData("HttpClient:WebProxy:Address", "http://proxy.local:3128", "HttpClient:WebProxy")]
    [InlineData("HttpClient:RequestHeaderEncoding", "utf-8", "HttpClient:RequestHeaderEncoding")]
    [InlineData("HttpClient:ResponseHeaderEncoding", "utf-8", "HttpClient:ResponseHeaderEncoding")]
    public void Validate_ExplicitNativeWithHttpClientOnlyKey_ErrorNamesTheKey(string key, string value, string named)
    {
        var (_, errors) = Read(Valid().Set("Clusters:c1:Transport", "Native").Set("Clusters:c1:" + key, value), nativeAvailable: true);
        Assert.Contains(errors, e => e.StartsWith($"ReverseProxy:Clusters:c1:{named}: the native relay cannot honour it", StringComparison.Ordinal));
    }

    [Fact]
    public void Validate_NoTransportWithHttpClientOnlyKey_NoError()
    {
        var (_, errors) = Read(Valid().Set("Clusters:c1:HttpClient:WebProxy:Address", "http://proxy.local:3128"), nativeAvailable: true);
        Assert.Empty(errors);
    }
}
