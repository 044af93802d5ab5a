using System.Buffers;
using Proxy.Codecs.Hpack;
using static Proxy.Codecs.Tests.Hpack.HpackTestHelpers;

namespace Proxy.Codecs.Tests.Hpack;

public class HpackEncoderTests
{
    [Fact]
    public void EncodeHeader_StaticFullMatch_IsIndexedRepresentation()
    {
        var encoder = new HpackEncoder();
        byte[] block = Encode(encoder, [(":status", "200")]);
        Assert.Single(block);
        Assert.Equal(0x80, block[0] & 0x80); // RFC 7541 §6.1
        Assert.Equal([(":status", "200")], Decode(new HpackDecoder(), block));
        Assert.Equal(0, encoder.DynamicTableCount);
    }

    [Fact]
    public void EncodeHeader_RepeatedField_UsesDynamicIndex()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        (string, string)[] headers = [("x-trace", "abc"), ("content-type", "application/grpc")];

        Assert.Equal(headers, Decode(decoder, Encode(encoder, headers)));
        Assert.Equal(2, encoder.DynamicTableCount);

        byte[] second = Encode(encoder, headers);
        Assert.All(second, b => Assert.Equal(0x80, b & 0x80)); // both indexed, one octet each
        Assert.Equal(headers, Decode(decoder, second));
    }

    [Fact]
    public void EncodeHeader_RepeatedFieldAfterItsEntryWasEvicted_SentAgainAsLiteral()
    {
        // The encoder remembers where it sent a field; once the peer's smaller table evicted that entry (a size update
        // between blocks), the same field must go out as a literal again, never as the stale index.
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        (string, string)[] headers = [("x-trace", "abc")];
        Assert.Equal(headers, Decode(decoder, Encode(encoder, headers)));
        Assert.All(Encode(encoder, headers), b => Assert.Equal(0x80, b & 0x80));

        decoder.SetMaxDynamicTableSize(0);
        encoder.SetPeerMaxDynamicTableSize(0);
        decoder.SetMaxDynamicTableSize(4096);
        encoder.SetPeerMaxDynamicTableSize(4096);
        byte[] block = Encode(encoder, headers);

        Assert.Equal(0x20, block[0] & 0xE0); // the size updates first (to 0, then 4,096)
        Assert.Contains(block, b => (b & 0xC0) == 0x40); // then a literal with incremental indexing, not an index
        Assert.Equal(headers, Decode(decoder, block));
        Assert.Equal(DynamicTable(decoder), DynamicTable(encoder));
    }

    [Fact]
    public void EncodeHeader_SameNameNewValue_UsesNewestDynamicNameAndStaysInSync()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        // Not in the static table: the second and third values reuse the dynamic name entry.
        (string, string)[] first = [("x-id", "a"), ("x-id", "bb"), ("x-other", "a")];
        (string, string)[] second = [("x-id", "bb"), ("x-id", "a"), ("x-id", "ccc"), ("x-other", "a")];

        Assert.Equal(first, Decode(decoder, Encode(encoder, first)));
        byte[] block = Encode(encoder, second);
        Assert.Equal(second, Decode(decoder, block));
        Assert.Equal(DynamicTable(decoder), DynamicTable(encoder));
        // Three indexed fields (one octet each) plus one literal with an indexed name and a 3-octet value.
        Assert.True(block.Length <= 3 + 1 + 1 + 3, $"block is {block.Length} octets");
    }

    [Fact]
    public void EncodeHeader_SensitiveFieldAlreadyInDynamicTable_NotSentAsIndexed()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        // Indexed once by a caller that did not mark it sensitive, then sent as sensitive: the value must
        // still go out as a never-indexed literal (RFC 7541 §7.1.3), only its name may be indexed.
        Decode(decoder, Encode(encoder, [("x-token", "secret")]));
        var output = new System.Buffers.ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        encoder.EncodeHeader(output, "x-token", "secret", neverIndex: true);
        byte[] block = output.WrittenSpan.ToArray();

        Assert.Equal(0x10, block[0] & 0xF0); // §6.2.3 never indexed
        // Name index 62 (dynamic 1) in a 4-bit prefix (RFC 7541 §5.1): 15, then 62 - 15.
        Assert.Equal(0x0F, block[0] & 0x0F);
        Assert.Equal(62 - 15, block[1]);
        Assert.Equal([("x-token", "secret")], Decode(decoder, block));
    }

    [Theory]
    [InlineData("authorization", "Bearer secret")]
    [InlineData("proxy-authorization", "Basic Zm9vOmJhcg==")]
    [InlineData("cookie", "session=abc")]
    [InlineData("set-cookie", "session=abc; HttpOnly")]
    public void EncodeHeader_SensitiveName_NeverIndexed(string name, string value)
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        for (int i = 0; i < 2; i++)
        {
            byte[] block = Encode(encoder, [(name, value)]);
            Assert.Equal(0x10, block[0] & 0xF0); // RFC 7541 §6.2.3
            Assert.Equal([(name, value)], Decode(decoder, block));
        }

        Assert.Equal(0, encoder.DynamicTableCount);
        Assert.Equal(0, decoder.DynamicTableCount);
    }

    [Fact]
    public void EncodeHeader_NeverIndexFlag_NeverIndexed()
    {
        var encoder = new HpackEncoder();
        var output = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        encoder.EncodeHeader(output, "x-api-key", "k1", neverIndex: true);
        Assert.Equal(0x10, output.WrittenSpan[0] & 0xF0);
        Assert.Equal(0, encoder.DynamicTableCount);
        Assert.Equal([("x-api-key", "k1")], Decode(new HpackDecoder(), output.WrittenSpan.ToArray()));
    }

    [Fact]
    public void EncodeHeader_VaryingField_NotIndexed()
    {
        var encoder = new HpackEncoder();
        byte[] block = Encode(encoder, [("content-length", "1234")]);
        Assert.Equal(0x00, block[0] & 0xF0); // RFC 7541 §6.2.2, name by static index
        Assert.Equal(0, encoder.DynamicTableCount);
        Assert.Equal([("content-length", "1234")], Decode(new HpackDecoder(), block));
    }

    [Fact]
    public void EncodeHeader_ValueTooBigForTable_NotIndexedAndDecodes()
    {
        var encoder = new HpackEncoder();
        string big = new('x', 5000);
        byte[] block = Encode(encoder, [("x-big", big)]);
        Assert.Equal(0, encoder.DynamicTableCount);
        Assert.Equal([("x-big", big)], Decode(new HpackDecoder(), block));
    }

    [Fact]
    public void EncodeHeader_WithoutHuffman_NoHuffmanBit()
    {
        var encoder = new HpackEncoder(useHuffman: false);
        byte[] block = Encode(encoder, [("x-name", "aaaaaaaaaa")]);
        Assert.Equal(0x40, block[0]);          // literal with indexing, new name
        Assert.Equal(0x00, block[1] & 0x80);   // raw name
        Assert.Equal([("x-name", "aaaaaaaaaa")], Decode(new HpackDecoder(), block));
    }

    [Fact]
    public void EncodeHeader_WithHuffman_ShorterStringsAreHuffmanCoded()
    {
        var encoder = new HpackEncoder(useHuffman: true);
        byte[] block = Encode(encoder, [("x-name", "aaaaaaaaaa")]);
        Assert.Equal(0x40, block[0]);
        Assert.Equal(0x80, block[1] & 0x80);
        Assert.Equal([("x-name", "aaaaaaaaaa")], Decode(new HpackDecoder(), block));
    }

    [Fact]
    public void EncodeHeader_Latin1Characters_RoundTrip()
    {
        string value = "caf\u00e9 \u00ff\u0001";
        var decoder = new HpackDecoder();
        Assert.Equal([("x-latin", value)], Decode(decoder, Encode(new HpackEncoder(), [("x-latin", value)])));
    }

    [Fact]
    public void EncodeHeader_UppercaseName_SentLowercase()
    {
        Assert.Equal([("content-type", "text/plain"), ("x-custom", "1")],
            Decode(new HpackDecoder(), Encode(new HpackEncoder(), [("Content-Type", "text/plain"), ("X-Custom", "1")])));
    }

    [Fact]
    public void EncodeHeader_UppercaseNameOfIndexedField_SentAsIndexedLowercase()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        Decode(decoder, Encode(encoder, [("x-custom", "1")]));

        byte[] block = Encode(encoder, [("X-Custom", "1")]);

        Assert.Equal([0x80 | 62], block); // RFC 7541 §6.1: dynamic index 1
        Assert.Equal([("x-custom", "1")], Decode(decoder, block));
    }

    [Fact]
    public void EncodeHeader_CharacterAboveFF_WithIndexedName_Throws()
    {
        var encoder = new HpackEncoder();
        Encode(encoder, [("x-name", "a")]);
        Assert.Throws<ArgumentException>(() => encoder.EncodeHeader(new ArrayBufferWriter<byte>(), "x-name", "\u20ac"));
        Assert.Throws<ArgumentException>(() => encoder.EncodeHeader(new ArrayBufferWriter<byte>(), "content-type", "\u20ac"));
    }

    [Fact]
    public void EncodeHeader_CharacterAboveFF_Throws()
    {
        var encoder = new HpackEncoder();
        Assert.Throws<ArgumentException>(() => encoder.EncodeHeader(new ArrayBufferWriter<byte>(), "x-name", "\u20ac"));
    }

    [Fact]
    public void BeginHeaderBlock_NoChange_EmitsNothing()
    {
        var encoder = new HpackEncoder();
        var output = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        Assert.Equal(0, output.WrittenCount);

        encoder.SetPeerMaxDynamicTableSize(4096); // same size as before
        encoder.BeginHeaderBlock(output);
        Assert.Equal(0, output.WrittenCount);
    }

    [Fact]
    public void Constructor_BelowInitial4096_FirstBlockAnnouncesSize()
    {
        var encoder = new HpackEncoder(maxDynamicTableSize: 1024);
        var decoder = new HpackDecoder(4096);
        byte[] block = Encode(encoder, [("x-a", "1")]);
        Assert.Equal([(0x20, 1024)], ReadSizeUpdates(block));
        Assert.Equal([("x-a", "1")], Decode(decoder, block));
        Assert.Equal(1024, decoder.DynamicTableMaxSize);
        Assert.Equal(1024, encoder.DynamicTableMaxSize);
    }

    [Fact]
    public void SetPeerMaxDynamicTableSize_Lowered_EmitsUpdateAndEvicts()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        Decode(decoder, Encode(encoder, [("x-a", "1"), ("x-b", "2")]));
        Assert.Equal(2, encoder.DynamicTableCount);

        encoder.SetPeerMaxDynamicTableSize(0);
        decoder.SetMaxDynamicTableSize(0);
        byte[] block = Encode(encoder, [("x-a", "1")]);
        Assert.Equal([(0x20, 0)], ReadSizeUpdates(block));
        Assert.Equal([("x-a", "1")], Decode(decoder, block));
        Assert.Equal(0, encoder.DynamicTableCount);
        Assert.Equal(0, decoder.DynamicTableCount);
    }

    [Fact]
    public void SetPeerMaxDynamicTableSize_LoweredThenRaised_EmitsSmallestThenFinal()
    {
        var encoder = new HpackEncoder(maxDynamicTableSize: 8192);
        var decoder = new HpackDecoder(4096);
        Decode(decoder, Encode(encoder, [("x-a", "1")]));

        encoder.SetPeerMaxDynamicTableSize(1000);
        encoder.SetPeerMaxDynamicTableSize(100);
        encoder.SetPeerMaxDynamicTableSize(16384);
        decoder.SetMaxDynamicTableSize(16384);

        // RFC 7541 §4.2: the smallest size in the interval, then the final size (capped by ours, 8192).
        byte[] block = Encode(encoder, [("x-a", "1")]);
        Assert.Equal([(0x20, 100), (0x20, 8192)], ReadSizeUpdates(block));
        Assert.Equal([("x-a", "1")], Decode(decoder, block));
        Assert.Equal(8192, decoder.DynamicTableMaxSize);
        Assert.Equal(DynamicTable(decoder), DynamicTable(encoder));
    }

    [Fact]
    public void SetPeerMaxDynamicTableSize_AboveConfigured_UsesConfigured()
    {
        var encoder = new HpackEncoder(maxDynamicTableSize: 4096);
        encoder.SetPeerMaxDynamicTableSize(65536);
        var output = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        Assert.Equal(0, output.WrittenCount); // min(4096, 65536) is the size already in use
        Assert.Equal(4096, encoder.DynamicTableMaxSize);
    }

    [Fact]
    public void SetPeerMaxDynamicTableSize_MidBlock_AppliesAtNextBlock()
    {
        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        var output = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        encoder.EncodeHeader(output, "x-a", "1");
        encoder.SetPeerMaxDynamicTableSize(0);
        encoder.EncodeHeader(output, "x-a", "1"); // still indexes the entry the peer has
        Assert.Equal([("x-a", "1"), ("x-a", "1")], Decode(decoder, output.WrittenSpan.ToArray()));

        decoder.SetMaxDynamicTableSize(0);
        Assert.Equal([("x-a", "1")], Decode(decoder, Encode(encoder, [("x-a", "1")])));
        Assert.Equal(0, decoder.DynamicTableCount);
    }

    /// <summary>Reads the dynamic table size updates (RFC 7541 §6.3) at the start of a block.</summary>
    private static List<(int Pattern, int Size)> ReadSizeUpdates(byte[] block)
    {
        var updates = new List<(int, int)>();
        int position = 0;
        while (position < block.Length && (block[position] & 0xE0) == 0x20)
        {
            updates.Add((0x20, IntegerCodec.Decode(block, ref position, 5)));
        }

        return updates;
    }
}
