using System.Buffers;
using Proxy.Codecs.Hpack;
using static Proxy.Codecs.Tests.Hpack.HpackTestHelpers;

namespace Proxy.Codecs.Tests.Hpack;

public class HpackDecoderTests
{
    [Fact]
    public void Decode_IndexZero_Throws()
    {
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(), Hex("80")));
    }

    [Fact]
    public void Decode_IndexPastStaticTableWithEmptyDynamicTable_Throws()
    {
        var decoder = new HpackDecoder();
        Assert.Equal([("www-authenticate", "")], Decode(decoder, Hex("bd"))); // 61: last static entry
        Assert.Throws<HpackDecodingException>(() => Decode(decoder, Hex("be")));  // 62: no dynamic entry
    }

    [Fact]
    public void Decode_IndexPastDynamicTable_Throws()
    {
        var decoder = new HpackDecoder();
        Decode(decoder, Hex("4003 6162 6301 64")); // abc: d, indexed
        Assert.Equal([("abc", "d")], Decode(decoder, Hex("be")));
        Assert.Throws<HpackDecodingException>(() => Decode(decoder, Hex("bf")));
    }

    [Theory]
    [InlineData("7f01 0161")] // literal with indexing, name index 64
    [InlineData("0f30 0161")] // literal without indexing, name index 63
    [InlineData("1f30 0161")] // never indexed, name index 63
    public void Decode_LiteralNameIndexOutOfRange_Throws(string hex)
    {
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(), Hex(hex)));
    }

    [Theory]
    [InlineData("41")]             // literal, value missing
    [InlineData("4105 6162")]      // value shorter than its length
    [InlineData("400a 6162")]      // name shorter than its length
    [InlineData("ff")]             // index integer truncated
    public void Decode_Truncated_Throws(string hex)
    {
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(), Hex(hex)));
    }

    [Fact]
    public void Decode_SizeUpdateAboveAdvertisedLimit_Throws()
    {
        // 3f e2 1f = 31 + 0x62 + (0x1f << 7) = 4097
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(4096), Hex("3fe21f 82")));
    }

    [Fact]
    public void Decode_SizeUpdateAtLimit_Accepted()
    {
        var decoder = new HpackDecoder(4096);
        Assert.Equal([(":method", "GET")], Decode(decoder, Hex("3fe11f 82"))); // 4096
        Assert.Equal(4096, decoder.DynamicTableMaxSize);
    }

    [Fact]
    public void Decode_SizeUpdateAfterField_Throws()
    {
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(), Hex("82 20")));
    }

    [Fact]
    public void Decode_TwoSizeUpdatesAtStart_EvictsThenRestores()
    {
        var decoder = new HpackDecoder();
        Decode(decoder, Hex("4003 6162 6301 64"));
        Assert.Equal(1, decoder.DynamicTableCount);

        // 0 then 4096: the first empties the table, the second sets the final size.
        Assert.Equal([(":method", "GET")], Decode(decoder, Hex("20 3fe11f 82")));
        Assert.Equal(0, decoder.DynamicTableCount);
        Assert.Equal(4096, decoder.DynamicTableMaxSize);
    }

    [Fact]
    public void SetMaxDynamicTableSize_Lowered_NextBlockWithoutUpdate_Throws()
    {
        var decoder = new HpackDecoder();
        decoder.SetMaxDynamicTableSize(100);
        Assert.Throws<HpackDecodingException>(() => Decode(decoder, Hex("82")));
    }

    [Fact]
    public void SetMaxDynamicTableSize_Lowered_NextBlockWithUpdate_Evicts()
    {
        var decoder = new HpackDecoder();
        Decode(decoder, Hex("4003 6162 6301 64"));     // 36 octets
        Decode(decoder, Hex("4003 6465 6601 67"));     // 36 octets
        decoder.SetMaxDynamicTableSize(40);
        Assert.Throws<HpackDecodingException>(() => Decode(decoder, Hex("3f0a 82"))); // 41 > 40

        Assert.Equal([(":method", "GET")], Decode(decoder, Hex("3f09 82")));          // 40
        Assert.Equal([("def", "g")], DynamicTable(decoder));

        // Once honoured, later blocks need no update.
        Assert.Equal([("def", "g")], Decode(decoder, Hex("be")));
    }

    [Fact]
    public void SetMaxDynamicTableSize_Raised_AllowsLargerUpdate()
    {
        var decoder = new HpackDecoder(4096);
        decoder.SetMaxDynamicTableSize(8192);
        Assert.Equal([(":method", "GET")], Decode(decoder, Hex("82"))); // no update needed
        Decode(decoder, Hex("3fe13f 82"));                             // 8192
        Assert.Equal(8192, decoder.DynamicTableMaxSize);
    }

    [Fact]
    public void Decode_EntryLargerThanTable_EmptiesTable()
    {
        var decoder = new HpackDecoder(64);
        Decode(decoder, Hex("4003 6162 6301 64"));
        Assert.Equal(1, decoder.DynamicTableCount);

        // RFC 7541 §4.4: adding an entry larger than the maximum empties the table.
        string value = new('v', 40);
        var headers = Decode(decoder, [0x40, 0x03, (byte)'x', (byte)'y', (byte)'z', 40, .. System.Text.Encoding.ASCII.GetBytes(value)]);
        Assert.Equal([("xyz", value)], headers);
        Assert.Equal(0, decoder.DynamicTableCount);
        Assert.Equal(0, decoder.DynamicTableSize);
    }

    [Fact]
    public void Decode_IndexedNameEvictedByItsOwnInsertion_KeepsName()
    {
        var decoder = new HpackDecoder(64);
        Decode(decoder, Hex("4003 6162 6301 64")); // abc: d (36 octets)

        // Literal with indexing, name = dynamic 62 (abc), value "0123456789": the insertion (45 octets)
        // evicts the entry whose name it uses (RFC 7541 §4.4).
        var headers = Decode(decoder, Hex("7e 0a 3031 3233 3435 3637 3839"));
        Assert.Equal([("abc", "0123456789")], headers);
        Assert.Equal([("abc", "0123456789")], DynamicTable(decoder));
        Assert.Equal(45, decoder.DynamicTableSize);
    }

    [Fact]
    public void Decode_RawStringLongerThanLimit_Throws()
    {
        var decoder = new HpackDecoder(maxStringLength: 4);
        Assert.Equal([(":path", "/abc")], Decode(decoder, Hex("0404 2f616263")));
        Assert.Throws<HpackDecodingException>(() => Decode(decoder, Hex("0405 2f61626364")));
    }

    [Fact]
    public void Decode_HuffmanStringLongerThanLimit_Throws()
    {
        // "www.example.com" Huffman-coded is 12 octets, 15 decoded.
        Assert.Equal(15, Decode(new HpackDecoder(maxStringLength: 15), Hex("048c f1e3c2e5f23a6ba0ab90f4ff"))[0].Value.Length);
        Assert.Throws<HpackDecodingException>(() =>
            Decode(new HpackDecoder(maxStringLength: 14), Hex("048c f1e3c2e5f23a6ba0ab90f4ff")));
    }

    [Theory]
    [InlineData("0481 ff")]       // 8 bits of padding
    [InlineData("0481 18")]       // 'a' + 000 padding
    [InlineData("0484 ffffffff")] // EOS
    public void Decode_BadHuffmanInBlock_Throws(string hex)
    {
        Assert.Throws<HpackDecodingException>(() => Decode(new HpackDecoder(), Hex(hex)));
    }

    [Fact]
    public void Decode_MultiSegmentSequence_SameAsContiguous()
    {
        // C.4.1, then custom-key: custom-value (C.4.3's literal), then that field by index.
        byte[] block = Hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf be");
        var expected = Decode(new HpackDecoder(), block);
        Assert.Equal(6, expected.Count);

        for (int split = 1; split < block.Length; split++)
        {
            var first = new Segment(block.AsMemory(0, split));
            Segment last = first.Append(block.AsMemory(split));
            var handler = new RecordingHandler();
            new HpackDecoder().Decode(new ReadOnlySequence<byte>(first, 0, last, last.Memory.Length), handler);
            Assert.Equal(expected, handler.Headers);
        }
    }

    [Fact]
    public void Decode_EmptyBlock_NoHeaders()
    {
        Assert.Empty(Decode(new HpackDecoder(), []));
    }

    private sealed class Segment : ReadOnlySequenceSegment<byte>
    {
        public Segment(ReadOnlyMemory<byte> memory) => Memory = memory;

        public Segment Append(ReadOnlyMemory<byte> memory)
        {
            var next = new Segment(memory) { RunningIndex = RunningIndex + Memory.Length };
            Next = next;
            return next;
        }
    }
}
