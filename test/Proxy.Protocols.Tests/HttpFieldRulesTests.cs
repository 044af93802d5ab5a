namespace Proxy.Protocols.Tests;

/// <summary>The one field policy: connection-specific fields in each of the spellings its callers need, and the character checks.</summary>
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

    // The character checks against their definitions, every octet (and every char up to U+01FF), alone and inside a
    // longer string (they are vectorized: a bad character past the first vector must be found too).

    // RFC 9113 §8.2.1: not 0x00-0x20, 0x41-0x5a, 0x7f-0xff; a colon only starts a pseudo-header.
    private static bool NameOctet(int b) => b is > 0x20 and < 0x7f && b is not (>= 0x41 and <= 0x5a) && b != ':';

    private static bool Visible(int c) => c is > 0x20 and < 0x7f;

    private static bool Sendable(int c) => c <= 0xff && c is not (0 or '\r' or '\n');

    private static byte[] Padded(byte b) => [.. "x-long-enough-for-any-vector-width-abcdefghij"u8, b, .. "tail"u8];

    [Fact]
    public void IsValidName_EveryOctet()
    {
        for (var b = 0; b <= 0xff; b++)
        {
            Assert.True(HttpFieldRules.IsValidName([(byte)b]) == NameOctet(b), $"0x{b:x2} alone");
            Assert.True(HttpFieldRules.IsValidName(Padded((byte)b)) == NameOctet(b), $"0x{b:x2} at position 45");
        }

        Assert.False(HttpFieldRules.IsValidName([]));
    }

    [Fact]
    public void IsVisible_EveryOctetAndChar()
    {
        for (var c = 0; c <= 0x1ff; c++)
        {
            var text = "visible-text-longer-than-one-vector-" + (char)c + "-tail";
            Assert.True(HttpFieldRules.IsVisible(text) == Visible(c), $"U+{c:x4}");
            if (c <= 0xff)
            {
                Assert.True(HttpFieldRules.IsVisible(Padded((byte)c)) == Visible(c), $"0x{c:x2}");
            }
        }

        Assert.True(HttpFieldRules.IsVisible(""));
    }

    [Fact]
    public void IsSendableValue_EveryChar()
    {
        for (var c = 0; c <= 0x1ff; c++)
        {
            Assert.True(HttpFieldRules.IsSendableValue(((char)c).ToString()) == Sendable(c), $"U+{c:x4} alone");
            Assert.True(HttpFieldRules.IsSendableValue("a value, longer than one vector: " + (char)c + " and more") == Sendable(c), $"U+{c:x4} inside");
        }

        Assert.True(HttpFieldRules.IsSendableValue(""));
        Assert.False(HttpFieldRules.IsSendableValue("ok\uffff"));
    }
}
