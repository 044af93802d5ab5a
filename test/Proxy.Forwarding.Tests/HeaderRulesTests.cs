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
}
