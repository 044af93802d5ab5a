using System.Buffers;
using Proxy.Codecs.Hpack;
using static Proxy.Codecs.Tests.Hpack.HpackTestHelpers;

namespace Proxy.Codecs.Tests.Hpack;

/// <summary>Every example of RFC 7541 Appendix C, hex typed from the RFC.</summary>
public class RfcAppendixCTests
{
    // C.1: integer representation examples.
    [Theory]
    [InlineData(10, 5, "0a")]   // C.1.1
    [InlineData(1337, 5, "1f9a0a")] // C.1.2
    [InlineData(42, 8, "2a")]   // C.1.3
    public void Integer_RfcExample_EncodesAndDecodes(int value, int prefixBits, string hex)
    {
        byte[] expected = Hex(hex);
        Span<byte> buffer = stackalloc byte[IntegerCodec.MaxEncodedLength];
        int written = IntegerCodec.Encode(value, prefixBits, 0, buffer);
        Assert.Equal(expected, buffer[..written].ToArray());

        int position = 0;
        Assert.Equal(value, IntegerCodec.Decode(expected, ref position, prefixBits));
        Assert.Equal(expected.Length, position);
    }

    [Fact]
    public void C2_1_LiteralWithIndexing_AddsToTable()
    {
        var decoder = new HpackDecoder();
        var headers = Decode(decoder, Hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"));
        Assert.Equal([("custom-key", "custom-header")], headers);
        Assert.Equal([("custom-key", "custom-header")], DynamicTable(decoder));
        Assert.Equal(55, decoder.DynamicTableSize);
    }

    [Fact]
    public void C2_2_LiteralWithoutIndexing_LeavesTableEmpty()
    {
        var decoder = new HpackDecoder();
        var headers = Decode(decoder, Hex("040c 2f73 616d 706c 652f 7061 7468"));
        Assert.Equal([(":path", "/sample/path")], headers);
        Assert.Equal(0, decoder.DynamicTableCount);
        Assert.Equal(0, decoder.DynamicTableSize);
    }

    [Fact]
    public void C2_3_LiteralNeverIndexed_LeavesTableEmpty()
    {
        var decoder = new HpackDecoder();
        var headers = Decode(decoder, Hex("1008 7061 7373 776f 7264 0673 6563 7265 74"));
        Assert.Equal([("password", "secret")], headers);
        Assert.Equal(0, decoder.DynamicTableCount);
    }

    [Fact]
    public void C2_4_IndexedField_DecodesStaticEntry()
    {
        var decoder = new HpackDecoder();
        Assert.Equal([(":method", "GET")], Decode(decoder, Hex("82")));
        Assert.Equal(0, decoder.DynamicTableCount);
    }

    private static readonly (string, string)[] s_request1 =
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")];

    private static readonly (string, string)[] s_request2 =
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"), ("cache-control", "no-cache")];

    private static readonly (string, string)[] s_request3 =
        [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"), ("custom-key", "custom-value")];

    private static readonly (string, string)[] s_table1 = [(":authority", "www.example.com")];
    private static readonly (string, string)[] s_table2 = [("cache-control", "no-cache"), (":authority", "www.example.com")];
    private static readonly (string, string)[] s_table3 =
        [("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")];

    // C.3: requests without Huffman; C.4: the same with Huffman.
    public static TheoryData<bool, string, string, string> RequestExamples => new()
    {
        {
            false,
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"
        },
        {
            true,
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"
        },
    };

    [Theory]
    [MemberData(nameof(RequestExamples))]
    public void C3_C4_Requests_DecodeWithTableAfterEachStep(bool huffman, string first, string second, string third)
    {
        _ = huffman;
        var decoder = new HpackDecoder();

        Assert.Equal(s_request1, Decode(decoder, Hex(first)));
        Assert.Equal(s_table1, DynamicTable(decoder));
        Assert.Equal(57, decoder.DynamicTableSize);

        Assert.Equal(s_request2, Decode(decoder, Hex(second)));
        Assert.Equal(s_table2, DynamicTable(decoder));
        Assert.Equal(110, decoder.DynamicTableSize);

        Assert.Equal(s_request3, Decode(decoder, Hex(third)));
        Assert.Equal(s_table3, DynamicTable(decoder));
        Assert.Equal(164, decoder.DynamicTableSize);
    }

    [Theory]
    [MemberData(nameof(RequestExamples))]
    public void C3_C4_Requests_EncoderProducesRfcBytes(bool huffman, string first, string second, string third)
    {
        var encoder = new HpackEncoder(4096, useHuffman: huffman);

        Assert.Equal(Hex(first), Encode(encoder, s_request1));
        Assert.Equal(s_table1, DynamicTable(encoder));
        Assert.Equal(Hex(second), Encode(encoder, s_request2));
        Assert.Equal(s_table2, DynamicTable(encoder));
        Assert.Equal(Hex(third), Encode(encoder, s_request3));
        Assert.Equal(s_table3, DynamicTable(encoder));
        Assert.Equal(164, encoder.DynamicTableSize);
    }

    private static readonly (string, string)[] s_response1 =
    [
        (":status", "302"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];

    private static readonly (string, string)[] s_response2 =
    [
        (":status", "307"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];

    private static readonly (string, string)[] s_response3 =
    [
        (":status", "200"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ("location", "https://www.example.com"), ("content-encoding", "gzip"),
        ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"),
    ];

    private static readonly (string, string)[] s_responseTable1 =
    [
        ("location", "https://www.example.com"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("cache-control", "private"), (":status", "302"),
    ];

    private static readonly (string, string)[] s_responseTable2 =
    [
        (":status", "307"), ("location", "https://www.example.com"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"), ("cache-control", "private"),
    ];

    private static readonly (string, string)[] s_responseTable3 =
    [
        ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"),
        ("content-encoding", "gzip"), ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ];

    // C.5: responses without Huffman; C.6: with Huffman. SETTINGS_HEADER_TABLE_SIZE is 256.
    public static TheoryData<bool, string, string, string> ResponseExamples => new()
    {
        {
            false,
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 " +
            "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d " +
            "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 " +
            "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31"
        },
        {
            true,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 " +
            "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab " +
            "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f " +
            "9587 3160 65c0 03ed 4ee5 b106 3d50 07"
        },
    };

    [Theory]
    [MemberData(nameof(ResponseExamples))]
    public void C5_C6_Responses_DecodeWithEvictions(bool huffman, string first, string second, string third)
    {
        _ = huffman;
        var decoder = new HpackDecoder(maxDynamicTableSize: 256);

        Assert.Equal(s_response1, Decode(decoder, Hex(first)));
        Assert.Equal(s_responseTable1, DynamicTable(decoder));
        Assert.Equal(222, decoder.DynamicTableSize);

        Assert.Equal(s_response2, Decode(decoder, Hex(second)));
        Assert.Equal(s_responseTable2, DynamicTable(decoder));
        Assert.Equal(222, decoder.DynamicTableSize);

        Assert.Equal(s_response3, Decode(decoder, Hex(third)));
        Assert.Equal(s_responseTable3, DynamicTable(decoder));
        Assert.Equal(215, decoder.DynamicTableSize);
    }

    [Theory]
    [MemberData(nameof(ResponseExamples))]
    public void C5_C6_Responses_EncoderMatchesRfcThenRoundTrips(bool huffman, string first, string second, string third)
    {
        _ = third;
        // The peer advertised 256, so the first block opens with a size update (3f e1 01 = 256)
        // that the RFC example (which starts from 256) does not have.
        var encoder = new HpackEncoder(4096, useHuffman: huffman);
        encoder.SetPeerMaxDynamicTableSize(256);
        var decoder = new HpackDecoder(maxDynamicTableSize: 4096);

        byte[] block1 = Encode(encoder, s_response1);
        Assert.Equal(Hex("3fe101" + first.Replace(" ", "")), block1);
        Assert.Equal(s_response1, Decode(decoder, block1));
        Assert.Equal(s_responseTable1, DynamicTable(encoder));

        byte[] block2 = Encode(encoder, s_response2);
        if (huffman)
        {
            // C.6.2 Huffman-codes "307" although that is no shorter (3 octets either way); we send
            // a string raw unless Huffman is strictly shorter, so only ":status" differs.
            Assert.Equal(Hex("4803 3330 37c1 c0bf"), block2);
        }
        else
        {
            Assert.Equal(Hex(second), block2);
        }

        Assert.Equal(s_response2, Decode(decoder, block2));
        Assert.Equal(s_responseTable2, DynamicTable(encoder));

        // The RFC indexes set-cookie; we send it never-indexed (see HpackEncoder), so compare
        // decoded fields and both tables instead of bytes.
        byte[] block3 = Encode(encoder, s_response3);
        Assert.Equal(s_response3, Decode(decoder, block3));
        Assert.Equal(DynamicTable(decoder), DynamicTable(encoder));
        Assert.Equal(decoder.DynamicTableSize, encoder.DynamicTableSize);
        Assert.DoesNotContain(DynamicTable(decoder), e => e.Name == "set-cookie");
    }
}
