namespace Proxy.Protocols.Tests;

/// <summary>The one connection-specific field policy, in each of the spellings its callers need.</summary>
public class HttpFieldRulesTests
{
    public static TheoryData<string> ConnectionSpecificNames() =>
        new() { "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade" };

    [Theory]
    [MemberData(nameof(ConnectionSpecificNames))]
    public void IsConnectionSpecific_EachNameInAnyCase_True(string name)
    {
        var mixed = char.ToUpperInvariant(name[0]) + name[1..];

        Assert.True(HttpFieldRules.IsConnectionSpecific(name));
        Assert.False(HttpFieldRules.IsConnectionSpecific(mixed)); // the lowercase form takes lowercased names only
        Assert.True(HttpFieldRules.IsConnectionSpecificIgnoreCase(name));
        Assert.True(HttpFieldRules.IsConnectionSpecificIgnoreCase(mixed));
        Assert.True(HttpFieldRules.IsConnectionSpecificIgnoreCase(name.ToUpperInvariant()));
        Assert.True(HttpFieldRules.IsConnectionSpecificInRequest(name, "x"));
        Assert.True(HttpFieldRules.IsConnectionSpecificInRequestIgnoreCase(mixed, "x"));
        Assert.True(HttpFieldRules.IsConnectionSpecificInResponse(name));
    }

    [Theory]
    [InlineData("te")]
    [InlineData("host")]
    [InlineData("content-length")]
    [InlineData("connectionx")]
    [InlineData("upgrade-insecure-requests")]
    [InlineData("")]
    public void IsConnectionSpecific_OtherNames_False(string name)
    {
        Assert.False(HttpFieldRules.IsConnectionSpecific(name));
        Assert.False(HttpFieldRules.IsConnectionSpecificIgnoreCase(name));
    }

    [Theory]
    [InlineData("trailers", false)]
    [InlineData("gzip", true)]
    [InlineData("trailers, gzip", true)]
    [InlineData("", true)]
    [InlineData("Trailers", true)] // HTTP/2: exactly "trailers"
    public void IsConnectionSpecificInRequest_Te_OnlyTrailersAllowed(string value, bool expected)
    {
        Assert.Equal(expected, HttpFieldRules.IsTeOtherThanTrailers("te", value));
        Assert.Equal(expected, HttpFieldRules.IsConnectionSpecificInRequest("te", value));
    }

    [Theory]
    [InlineData("te", "trailers", false)]
    [InlineData("TE", "Trailers", false)] // HTTP/1.1: names and this value in any case
    [InlineData("Te", "gzip", true)]
    [InlineData("TE", "", true)]
    public void IsConnectionSpecificInRequestIgnoreCase_Te_OnlyTrailersInAnyCaseAllowed(string name, string value, bool expected)
        => Assert.Equal(expected, HttpFieldRules.IsConnectionSpecificInRequestIgnoreCase(name, value));

    [Fact]
    public void IsConnectionSpecificInResponse_AnyTe_True()
    {
        Assert.True(HttpFieldRules.IsConnectionSpecificInResponse("te"));
        Assert.False(HttpFieldRules.IsConnectionSpecificInResponse("trailer"));
        Assert.False(HttpFieldRules.IsConnectionSpecificInResponse("content-type"));
    }

    [Theory]
    [InlineData("x-custom_header.1~", true)]
    [InlineData("GET", true)]
    [InlineData("", false)]
    [InlineData("bad name", false)]
    [InlineData("bad:name", false)]
    [InlineData("caf\u00e9", false)]
    public void IsToken_CharsAndBytes_Agree(string text, bool expected)
    {
        Assert.Equal(expected, HttpFieldRules.IsToken(text.AsSpan()));
        Assert.Equal(expected, HttpFieldRules.IsToken(System.Text.Encoding.Latin1.GetBytes(text)));
    }
}
