using System.Buffers;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Testing;

namespace Proxy.Codecs.Tests.Http1;

public class Http1ChunkedDecoderTests
{
    private sealed class Trailers : IHttp1FieldSink
    {
        public List<(string, string)> Fields { get; } = new();

        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) =>
            Fields.Add((Encoding.ASCII.GetString(name), Encoding.ASCII.GetString(value)));
    }

    /// <summary>Feeds <paramref name="parts"/> one after another, carrying unconsumed bytes over, like a pipe would.</summary>
    private static (string Body, bool Complete, Trailers Trailers, string Leftover) Decode(params byte[][] parts)
    {
        var decoder = new Http1ChunkedDecoder(Http1ParserLimits.Default);
        var trailers = new Trailers();
        var body = new StringBuilder();
        var pending = Array.Empty<byte>();
        foreach (var part in parts)
        {
            pending = [.. pending, .. part];
            var reader = new SequenceReader<byte>(new ReadOnlySequence<byte>(pending));
            while (!decoder.IsComplete && decoder.TryRead(ref reader, trailers, out var data))
            {
                body.Append(Encoding.ASCII.GetString(data.ToArray()));
            }
            pending = pending[(int)reader.Consumed..];
        }
        return (body.ToString(), decoder.IsComplete, trailers, Encoding.ASCII.GetString(pending));
    }

    private static (string Body, bool Complete, Trailers Trailers, string Leftover) Decode(string text) => Decode(Encoding.ASCII.GetBytes(text));

    private const string Valid = "5\r\nhello\r\n1A;name=value;x\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: yes\r\nY: 2\r\n\r\nNEXT";

    [Fact]
    public void TryRead_ValidBody_DataExtensionsSkippedTrailersParsed()
    {
        var r = Decode(Valid);

        Assert.True(r.Complete);
        Assert.Equal("helloabcdefghijklmnopqrstuvwxyz", r.Body);
        Assert.Equal(new[] { ("X-Trailer", "yes"), ("Y", "2") }, r.Trailers.Fields);
        Assert.Equal("NEXT", r.Leftover);
    }

    [Fact]
    public void TryRead_UppercaseHexAndLeadingZeros_Accepted()
    {
        var r = Decode("000A\r\n0123456789\r\n00\r\n\r\n");
        Assert.True(r.Complete);
        Assert.Equal("0123456789", r.Body);
    }

    [Fact]
    public void TryRead_SplitAtEveryPoint_SameResult()
    {
        var bytes = Encoding.ASCII.GetBytes(Valid);
        for (var i = 0; i <= bytes.Length; i++)
        {
            var r = Decode(bytes[..i], bytes[i..]);
            Assert.True(r.Complete, $"split at {i}");
            Assert.Equal("helloabcdefghijklmnopqrstuvwxyz", r.Body);
            Assert.Equal(2, r.Trailers.Fields.Count);
            Assert.Equal("NEXT", r.Leftover);
        }
    }

    [Fact]
    public void TryRead_OneByteAtATime_SameResult()
    {
        var r = Decode(Encoding.ASCII.GetBytes(Valid).Select(b => new[] { b }).ToArray());
        Assert.True(r.Complete);
        Assert.Equal("helloabcdefghijklmnopqrstuvwxyz", r.Body);
    }

    [Fact]
    public void TryRead_MultiSegmentInput_DataSlicedAcrossSegments()
    {
        var bytes = Encoding.ASCII.GetBytes("5\r\nhel");
        var more = Encoding.ASCII.GetBytes("lo\r\n0\r\n\r\n");
        var decoder = new Http1ChunkedDecoder(Http1ParserLimits.Default);
        var reader = new SequenceReader<byte>(TestSequence.Create(bytes, more));
        Assert.True(decoder.TryRead(ref reader, null, out var data));
        Assert.Equal("hello", Encoding.ASCII.GetString(data.ToArray()));
        Assert.True(decoder.TryRead(ref reader, null, out _));
        Assert.True(decoder.IsComplete);
    }

    [Fact]
    public void TryRead_Incomplete_NotComplete()
    {
        var r = Decode("5\r\nhello\r\n0\r\n");
        Assert.False(r.Complete);
        Assert.Equal("hello", r.Body);
        // The last-chunk line is consumed; the decoder now waits for the trailer section's empty line.
        Assert.Equal("", r.Leftover);
    }

    [Theory]
    [InlineData("\r\nhello\r\n0\r\n\r\n")]          // empty size
    [InlineData("g\r\nhello\r\n0\r\n\r\n")]         // not hex
    [InlineData("5 x\r\nhello\r\n0\r\n\r\n")]       // junk after size
    [InlineData("5\nhello\r\n0\r\n\r\n")]           // bare LF after size
    [InlineData("5\r\nhelloX\r\n0\r\n\r\n")]        // data longer than size
    [InlineData("5\r\nhello\n0\r\n\r\n")]           // bare LF after data
    [InlineData("5;a=\u0001\r\nhello\r\n0\r\n\r\n")] // CTL in extension
    [InlineData("8000000000000000\r\n")]            // overflow
    [InlineData("fffffffffffffffff\r\n")]           // overflow
    [InlineData("0\r\nX : y\r\n\r\n")]              // malformed trailer
    [InlineData("0\r\n\n")]                         // bare LF ending trailers
    public void TryRead_MalformedChunk_400(string text)
    {
        var ex = Assert.Throws<Http1ParseException>(() => Decode(text));
        Assert.Equal(400, ex.StatusCode);
    }

    [Fact]
    public void TryRead_MaxSizeHex_AcceptedWithoutOverflow()
    {
        var decoder = new Http1ChunkedDecoder(Http1ParserLimits.Default);
        var reader = new SequenceReader<byte>(new ReadOnlySequence<byte>(Encoding.ASCII.GetBytes("7fffffffffffffff\r\nab")));
        Assert.True(decoder.TryRead(ref reader, null, out var data));
        Assert.Equal(2, data.Length);
    }

    [Fact]
    public void TryRead_SizeLineTooLong_400()
    {
        var ex = Assert.Throws<Http1ParseException>(() => Decode("5;" + new string('a', Http1ChunkedDecoder.MaxChunkLineLength + 10)));
        Assert.Equal(400, ex.StatusCode);
    }

    [Fact]
    public void TryRead_TrailersTooLarge_431()
    {
        var limits = new Http1ParserLimits(100, 32, 10);
        var decoder = new Http1ChunkedDecoder(limits);
        var reader = new SequenceReader<byte>(new ReadOnlySequence<byte>(Encoding.ASCII.GetBytes("0\r\nX: " + new string('a', 40) + "\r\n\r\n")));
        Http1ParseException? caught = null;
        try
        {
            decoder.TryRead(ref reader, null, out _);
        }
        catch (Http1ParseException ex)
        {
            caught = ex;
        }
        Assert.Equal(431, caught?.StatusCode);
    }
}
