using System.Buffers;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Testing;

namespace Proxy.Codecs.Tests.Http1;

/// <summary>The partial-input checks every head parser (request or response) must pass.</summary>
internal static class HeadParserAssert
{
    /// <summary>What one parse call reported: completion, octets consumed, and what the sink saw (comparable by value).</summary>
    public readonly record struct Outcome(bool Complete, long Consumed, string Observed);

    /// <summary>Every proper prefix of <paramref name="text"/> needs more data and leaves no trace: nothing consumed, the sink untouched.</summary>
    public static void EveryPrefixNeedsMoreData(string text, Func<ReadOnlySequence<byte>, Outcome> parse)
    {
        var bytes = Encoding.ASCII.GetBytes(text);
        for (var i = 0; i < bytes.Length; i++)
        {
            var outcome = parse(new ReadOnlySequence<byte>(bytes, 0, i));
            Assert.False(outcome.Complete, $"complete at prefix {i}");
            Assert.Equal(0, outcome.Consumed);
            Assert.Equal("", outcome.Observed);
        }
    }

    /// <summary>
    /// A head the parser rejects is rejected with the same status and reason whichever two segments it is split into, and
    /// in one-byte segments: a multi-segment buffer is parsed from its first segment, then from a bounded copy.
    /// </summary>
    public static void SplitAtEveryPointSameError(string text, Func<ReadOnlySequence<byte>, object?> parse)
    {
        var bytes = Encoding.Latin1.GetBytes(text);
        var expected = Assert.Throws<Http1ParseException>(() => parse(new ReadOnlySequence<byte>(bytes)));
        for (var i = 0; i <= bytes.Length; i++)
        {
            var split = Assert.Throws<Http1ParseException>(() => parse(TestSequence.Split(bytes, i)));
            Assert.Equal((expected.StatusCode, expected.Reason), (split.StatusCode, split.Reason));
        }
        var bytewise = Assert.Throws<Http1ParseException>(() => parse(TestSequence.Create(bytes.Select(b => new[] { b }).ToArray())));
        Assert.Equal((expected.StatusCode, expected.Reason), (bytewise.StatusCode, bytewise.Reason));
    }

    /// <summary><paramref name="text"/> followed by other bytes parses the same whichever two segments it is split into.</summary>
    public static void SplitAtEveryPointSameResult(string text, Func<ReadOnlySequence<byte>, Outcome> parse)
    {
        var bytes = Encoding.ASCII.GetBytes(text + "NEXT");
        var expected = parse(new ReadOnlySequence<byte>(bytes));
        Assert.True(expected.Complete);
        Assert.Equal(text.Length, expected.Consumed);
        for (var i = 0; i <= bytes.Length; i++)
        {
            Assert.Equal(expected, parse(TestSequence.Split(bytes, i)));
        }
    }
}
