using System.Buffers;
using System.Text;
using Proxy.Codecs.Hpack;

namespace Proxy.Codecs.Tests.Hpack;

/// <summary>Collects decoded fields as Latin-1 strings.</summary>
internal sealed class RecordingHandler : IHpackHeaderHandler
{
    public List<(string Name, string Value)> Headers { get; } = [];

    public void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) =>
        Headers.Add((Encoding.Latin1.GetString(name), Encoding.Latin1.GetString(value)));
}

internal static class HpackTestHelpers
{
    /// <summary>Parses hex, ignoring whitespace (so RFC dumps can be pasted in groups).</summary>
    public static byte[] Hex(string hex)
    {
        var compact = new StringBuilder(hex.Length);
        foreach (char c in hex)
        {
            if (!char.IsWhiteSpace(c))
            {
                compact.Append(c);
            }
        }

        return Convert.FromHexString(compact.ToString());
    }

    public static List<(string Name, string Value)> Decode(HpackDecoder decoder, byte[] block)
    {
        var handler = new RecordingHandler();
        decoder.Decode(new ReadOnlySequence<byte>(block), handler);
        return handler.Headers;
    }

    public static byte[] Encode(HpackEncoder encoder, IEnumerable<(string Name, string Value)> headers)
    {
        var output = new ArrayBufferWriter<byte>();
        encoder.BeginHeaderBlock(output);
        foreach (var (name, value) in headers)
        {
            encoder.EncodeHeader(output, name, value);
        }

        return output.WrittenSpan.ToArray();
    }

    public static List<(string Name, string Value)> DynamicTable(HpackDecoder decoder)
    {
        var entries = new List<(string, string)>();
        for (int i = 1; i <= decoder.DynamicTableCount; i++)
        {
            var (name, value) = decoder.GetDynamicEntry(i);
            entries.Add((Encoding.Latin1.GetString(name), Encoding.Latin1.GetString(value)));
        }

        return entries;
    }

    public static List<(string Name, string Value)> DynamicTable(HpackEncoder encoder)
    {
        var entries = new List<(string, string)>();
        for (int i = 1; i <= encoder.DynamicTableCount; i++)
        {
            entries.Add(encoder.GetDynamicEntry(i));
        }

        return entries;
    }
}
