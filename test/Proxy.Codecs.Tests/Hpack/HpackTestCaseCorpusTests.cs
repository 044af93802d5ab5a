using System.Buffers;
using System.Text.Json;
using Proxy.Codecs.Hpack;

namespace Proxy.Codecs.Tests.Hpack;

/// <summary>
/// The hpack-test-case corpus: every encoded story decodes exactly, and every raw-data story
/// round-trips through our encoder and decoder. The root is HPACK_TEST_CASE_DIR when set, else
/// the vendored subset copied next to the test assembly.
/// </summary>
public class HpackTestCaseCorpusTests
{
    private const string RawDataFolder = "raw-data";

    private static string Root =>
        Environment.GetEnvironmentVariable("HPACK_TEST_CASE_DIR") is { Length: > 0 } root
            ? root
            : Path.Combine(AppContext.BaseDirectory, "Hpack", "hpack-test-case");

    public static TheoryData<string> EncodedStories()
    {
        var data = new TheoryData<string>();
        foreach (string folder in Directory.GetDirectories(Root).Order(StringComparer.Ordinal))
        {
            if (Path.GetFileName(folder) == RawDataFolder)
            {
                continue;
            }

            foreach (string story in Directory.GetFiles(folder, "*.json").Order(StringComparer.Ordinal))
            {
                data.Add(Path.GetRelativePath(Root, story));
            }
        }

        return data;
    }

    public static TheoryData<string> RawStories()
    {
        var data = new TheoryData<string>();
        foreach (string story in Directory.GetFiles(Path.Combine(Root, RawDataFolder), "*.json").Order(StringComparer.Ordinal))
        {
            data.Add(Path.GetRelativePath(Root, story));
        }

        return data;
    }

    [Fact]
    public void Corpus_EveryFolder_HasStories()
    {
        string[] folders = Directory.GetDirectories(Root);
        Assert.Contains(folders, f => Path.GetFileName(f) == RawDataFolder);
        Assert.True(folders.Length >= 5, $"expected raw-data and at least four encoder folders under {Root}");
        foreach (string folder in folders)
        {
            Assert.NotEmpty(Directory.GetFiles(folder, "story_*.json"));
        }
    }

    [Theory]
    [MemberData(nameof(EncodedStories))]
    public void Story_EveryCase_DecodesExactly(string story)
    {
        List<Case> cases = LoadStory(story);
        Assert.NotEmpty(cases);

        // One decoder per story: the cases share one compression context. header_table_size is
        // the SETTINGS_HEADER_TABLE_SIZE acknowledged just before its case.
        int initialMax = Math.Max(4096, cases[0].HeaderTableSize ?? 0);
        var decoder = new HpackDecoder(initialMax);
        foreach (Case c in cases)
        {
            if (c.HeaderTableSize is int size)
            {
                decoder.SetMaxDynamicTableSize(size);
            }

            var handler = new RecordingHandler();
            decoder.Decode(new ReadOnlySequence<byte>(Convert.FromHexString(c.Wire!)), handler);
            Assert.True(c.Headers.SequenceEqual(handler.Headers), $"{story} case {c.SeqNo}: decoded headers differ");
        }
    }

    [Theory]
    [MemberData(nameof(RawStories))]
    public void RawStory_EveryCase_RoundTripsThroughEncoderAndDecoder(string story)
    {
        List<Case> cases = LoadStory(story);
        Assert.NotEmpty(cases);

        var encoder = new HpackEncoder();
        var decoder = new HpackDecoder();
        var output = new ArrayBufferWriter<byte>();
        int index = 0;
        foreach (Case c in cases)
        {
            output.ResetWrittenCount();
            encoder.BeginHeaderBlock(output);
            foreach (var (name, value) in c.Headers)
            {
                encoder.EncodeHeader(output, name, value);
            }

            var handler = new RecordingHandler();
            decoder.Decode(output.WrittenSpan, handler);
            Assert.True(c.Headers.SequenceEqual(handler.Headers), $"{story} case {index}: round-tripped headers differ");
            Assert.Equal(encoder.DynamicTableSize, decoder.DynamicTableSize);
            index++;
        }
    }

    private sealed record Case(int SeqNo, int? HeaderTableSize, string? Wire, List<(string Name, string Value)> Headers);

    private static List<Case> LoadStory(string relativePath)
    {
        using JsonDocument document = JsonDocument.Parse(File.ReadAllBytes(Path.Combine(Root, relativePath)));
        var cases = new List<Case>();
        int seqNo = 0;
        foreach (JsonElement c in document.RootElement.GetProperty("cases").EnumerateArray())
        {
            int? tableSize = c.TryGetProperty("header_table_size", out JsonElement size) && size.ValueKind == JsonValueKind.Number
                ? size.GetInt32()
                : null; // absent or null: unchanged
            string? wire = c.TryGetProperty("wire", out JsonElement w) ? w.GetString() : null;
            var headers = new List<(string, string)>();
            foreach (JsonElement header in c.GetProperty("headers").EnumerateArray())
            {
                foreach (JsonProperty field in header.EnumerateObject())
                {
                    headers.Add((field.Name, field.Value.GetString()!));
                }
            }

            cases.Add(new Case(c.TryGetProperty("seqno", out JsonElement s) ? s.GetInt32() : seqNo, tableSize, wire, headers));
            seqNo++;
        }

        return cases;
    }
}
