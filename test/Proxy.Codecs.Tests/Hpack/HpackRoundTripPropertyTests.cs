using System.Buffers;
using Proxy.Codecs.Hpack;

namespace Proxy.Codecs.Tests.Hpack;

/// <summary>
/// Random header lists through one encoder and one decoder across many blocks, with the peer's
/// table size changing between blocks: every block decodes exactly, and both tables agree.
/// </summary>
public class HpackRoundTripPropertyTests
{
    private static readonly string[] s_names =
    [
        ":status", ":method", ":path", ":authority", ":scheme", "content-type", "content-length",
        "cache-control", "date", "etag", "server", "cookie", "set-cookie", "authorization", "accept",
        "user-agent", "grpc-status", "grpc-message", "x-request-id", "x-custom-a", "x-custom-b", "x-long",
    ];

    private static readonly string[] s_commonValues =
    [
        "200", "404", "GET", "POST", "/", "/index.html", "http", "https", "application/grpc", "text/event-stream",
        "no-cache", "0", "gzip, deflate", "",
    ];

    [Theory]
    [InlineData(1, 4096, true)]
    [InlineData(2, 4096, false)]
    [InlineData(3, 256, true)]
    [InlineData(4, 0, true)]
    [InlineData(5, 65536, true)]
    public void RandomBlocks_WithTableSizeChanges_DecodeExactly(int seed, int encoderMax, bool huffman)
    {
        var random = new Random(seed);
        var encoder = new HpackEncoder(encoderMax, huffman);
        var decoder = new HpackDecoder(4096);
        var output = new ArrayBufferWriter<byte>();
        var recent = new List<(string, string)>();

        for (int block = 0; block < 400; block++)
        {
            if (random.Next(10) == 0)
            {
                // The decoder side advertises a new SETTINGS_HEADER_TABLE_SIZE (sometimes twice
                // between blocks); once ACKed both sides learn it.
                int changes = random.Next(1, 3);
                for (int i = 0; i < changes; i++)
                {
                    int size = random.Next(4) switch { 0 => 0, 1 => random.Next(1, 300), 2 => 4096, _ => random.Next(300, 20000) };
                    decoder.SetMaxDynamicTableSize(size);
                    encoder.SetPeerMaxDynamicTableSize(size);
                }
            }

            var headers = new List<(string, string)>();
            int count = random.Next(0, 20);
            for (int i = 0; i < count; i++)
            {
                headers.Add(recent.Count > 0 && random.Next(3) == 0
                    ? recent[random.Next(recent.Count)]
                    : (s_names[random.Next(s_names.Length)], RandomValue(random)));
            }

            output.ResetWrittenCount();
            encoder.BeginHeaderBlock(output);
            foreach (var (name, value) in headers)
            {
                encoder.EncodeHeader(output, name, value, neverIndex: random.Next(20) == 0);
            }

            var handler = new RecordingHandler();
            decoder.Decode(output.WrittenSpan, handler);
            Assert.Equal(headers, handler.Headers);
            Assert.Equal(encoder.DynamicTableSize, decoder.DynamicTableSize);
            Assert.Equal(HpackTestHelpers.DynamicTable(encoder), HpackTestHelpers.DynamicTable(decoder));

            recent.AddRange(headers);
            if (recent.Count > 50)
            {
                recent.RemoveRange(0, recent.Count - 50);
            }
        }
    }

    private static string RandomValue(Random random)
    {
        switch (random.Next(4))
        {
            case 0:
                return s_commonValues[random.Next(s_commonValues.Length)];
            case 1:
                {
                    // Any octet, including ones with long Huffman codes.
                    var chars = new char[random.Next(0, 40)];
                    for (int i = 0; i < chars.Length; i++)
                    {
                        chars[i] = (char)random.Next(0, 256);
                    }

                    return new string(chars);
                }

            case 2:
                return new string('v', random.Next(100, 3000)); // sometimes too big to index

            default:
                {
                    var chars = new char[random.Next(1, 60)];
                    for (int i = 0; i < chars.Length; i++)
                    {
                        chars[i] = (char)random.Next(0x20, 0x7F);
                    }

                    return new string(chars);
                }
        }
    }
}
