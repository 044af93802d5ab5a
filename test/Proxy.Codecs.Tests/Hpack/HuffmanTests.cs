using Proxy.Codecs.Hpack;
using static Proxy.Codecs.Tests.Hpack.HpackTestHelpers;

namespace Proxy.Codecs.Tests.Hpack;

public class HuffmanTests
{
    // Spot checks of the derived canonical codes against RFC 7541 Appendix B (code as hex, len).
    [Theory]
    [InlineData(0, 0x1ff8u, 13)]
    [InlineData(1, 0x7fffd8u, 23)]
    [InlineData(9, 0xffffeau, 24)]
    [InlineData(10, 0x3ffffffcu, 30)]
    [InlineData(22, 0x3ffffffeu, 30)]
    [InlineData(' ', 0x14u, 6)]
    [InlineData('/', 0x18u, 6)]
    [InlineData('0', 0x0u, 5)]
    [InlineData(':', 0x5cu, 7)]
    [InlineData('X', 0xfcu, 8)]
    [InlineData('\\', 0x7fff0u, 19)]
    [InlineData('z', 0x7bu, 7)]
    [InlineData('{', 0x7ffeu, 15)]
    [InlineData(127, 0xffffffcu, 28)]
    [InlineData(128, 0xfffe6u, 20)]
    [InlineData(199, 0x1ffffecu, 25)]
    [InlineData(220, 0xffffffdu, 28)]
    [InlineData(254, 0x7fffff0u, 27)]
    [InlineData(255, 0x3ffffeeu, 26)]
    [InlineData(256, 0x3fffffffu, 30)]
    public void GetCode_Symbol_MatchesAppendixB(int symbol, uint code, int length)
    {
        Assert.Equal(length, Huffman.GetCodeLength(symbol));
        Assert.Equal(code, Huffman.GetCode(symbol));
    }

    [Fact]
    public void CodeLengths_Kraft_SumIsExactlyOne()
    {
        // A complete prefix code: sum of 2^-len over all 257 symbols is 1 (in units of 2^-30).
        long sum = 0;
        for (int symbol = 0; symbol <= Huffman.Eos; symbol++)
        {
            sum += 1L << (30 - Huffman.GetCodeLength(symbol));
        }

        Assert.Equal(1L << 30, sum);
    }

    [Fact]
    public void RoundTrip_EverySingleByte_DecodesToItself()
    {
        var encoded = new byte[8];
        var decoded = new byte[4];
        for (int b = 0; b < 256; b++)
        {
            byte[] source = [(byte)b];
            int length = Huffman.Encode(source, encoded);
            Assert.Equal(Huffman.GetEncodedLength(source), length);
            Assert.Equal(1, Huffman.Decode(encoded.AsSpan(0, length), decoded));
            Assert.Equal((byte)b, decoded[0]);
        }
    }

    [Fact]
    public void RoundTrip_RandomByteStrings_DecodeToThemselves()
    {
        var random = new Random(7541);
        for (int i = 0; i < 2000; i++)
        {
            var source = new byte[random.Next(0, 300)];
            random.NextBytes(source);
            if (i % 2 == 0)
            {
                // Half the strings are text-like, where the short codes live.
                for (int j = 0; j < source.Length; j++)
                {
                    source[j] = (byte)random.Next(0x20, 0x7F);
                }
            }

            var encoded = new byte[Huffman.GetEncodedLength(source)];
            Assert.Equal(encoded.Length, Huffman.Encode(source, encoded));
            var decoded = new byte[source.Length];
            int written = Huffman.Decode(encoded, decoded);
            Assert.Equal(source, decoded.AsSpan(0, written).ToArray());
        }
    }

    [Fact]
    public void Encode_Chars_MatchesBytes()
    {
        string text = "custom-value \u00e9\u00ff\u0001";
        byte[] bytes = System.Text.Encoding.Latin1.GetBytes(text);
        var fromChars = new byte[Huffman.GetEncodedLength(text)];
        var fromBytes = new byte[Huffman.GetEncodedLength(bytes)];
        Huffman.Encode(text, fromChars);
        Huffman.Encode(bytes, fromBytes);
        Assert.Equal(fromBytes, fromChars);
    }

    [Fact]
    public void Decode_Empty_ReturnsNothing()
    {
        Assert.Equal(0, Huffman.Decode([], new byte[4]));
    }

    [Fact]
    public void Decode_SevenBitsOfOnesPadding_IsAccepted()
    {
        // 'a' is 00011; the remaining three bits 111 are the EOS prefix (RFC 7541 §5.2).
        var output = new byte[4];
        Assert.Equal(1, Huffman.Decode(Hex("1f"), output));
        Assert.Equal((byte)'a', output[0]);
    }

    [Theory]
    [InlineData("ff")]             // 8 bits of padding and no symbol
    [InlineData("1fff")]           // 'a' then 11 bits of ones
    [InlineData("18")]             // 'a' then padding 000: not the EOS prefix
    [InlineData("1e")]             // 'a' then padding 110
    [InlineData("fffffffc")]       // EOS (30 ones) then 00 padding
    [InlineData("ffffffff")]       // EOS then two ones
    [InlineData("1ffffffff0")]     // 'a', then EOS inside the string
    public void Decode_InvalidPaddingOrEos_Throws(string hex)
    {
        Assert.Throws<HpackDecodingException>(() => Huffman.Decode(Hex(hex), new byte[16]));
    }

    [Fact]
    public void Decode_OutputTooSmall_Throws()
    {
        byte[] source = "www.example.com"u8.ToArray();
        var encoded = new byte[Huffman.GetEncodedLength(source)];
        Huffman.Encode(source, encoded);
        Assert.Throws<HpackDecodingException>(() => Huffman.Decode(encoded, new byte[source.Length - 1]));
    }
}
