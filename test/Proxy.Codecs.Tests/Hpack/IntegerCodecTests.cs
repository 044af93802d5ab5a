using Proxy.Codecs.Hpack;
using static Proxy.Codecs.Tests.Hpack.HpackTestHelpers;

namespace Proxy.Codecs.Tests.Hpack;

public class IntegerCodecTests
{
    [Theory]
    [InlineData(0, 4)]
    [InlineData(14, 4)]
    [InlineData(15, 4)]
    [InlineData(16, 4)]
    [InlineData(126, 7)]
    [InlineData(127, 7)]
    [InlineData(128, 7)]
    [InlineData(16_384, 5)]
    [InlineData(int.MaxValue, 1)]
    [InlineData(int.MaxValue, 8)]
    public void EncodeDecode_Value_RoundTripsAndKeepsFlags(int value, int prefixBits)
    {
        byte flags = (byte)(0xFF << prefixBits);
        Span<byte> buffer = stackalloc byte[IntegerCodec.MaxEncodedLength];
        int written = IntegerCodec.Encode(value, prefixBits, flags, buffer);
        Assert.Equal(flags, (byte)(buffer[0] & flags));

        int position = 0;
        Assert.Equal(value, IntegerCodec.Decode(buffer[..written], ref position, prefixBits));
        Assert.Equal(written, position);
    }

    [Theory]
    [InlineData("1f")]              // prefix full, continuation missing
    [InlineData("1f8080")]          // continuation bit set on the last octet
    public void Decode_Truncated_Throws(string hex)
    {
        byte[] input = Hex(hex);
        Assert.Throws<HpackDecodingException>(() =>
        {
            int position = 0;
            IntegerCodec.Decode(input, ref position, 5);
        });
    }

    [Theory]
    [InlineData("1fe1ffffff07")]    // 31 + 0x7fffffe1 + ... > int.MaxValue
    [InlineData("1fffffffff0f")]    // 2^35-ish
    [InlineData("1f808080808000")]  // six continuation octets, even though the value is small
    public void Decode_Overflow_Throws(string hex)
    {
        byte[] input = Hex(hex);
        Assert.Throws<HpackDecodingException>(() =>
        {
            int position = 0;
            IntegerCodec.Decode(input, ref position, 5);
        });
    }

    [Fact]
    public void Decode_MaxInt_Accepted()
    {
        // int.MaxValue with a 5-bit prefix: 31 + 2147483616 = 0x7FFFFFE0 -> e0 ff ff ff 07.
        byte[] input = Hex("1fe0ffffff07");
        int position = 0;
        Assert.Equal(int.MaxValue, IntegerCodec.Decode(input, ref position, 5));
    }
}
