using System.Buffers;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Testing;

namespace Proxy.Codecs.Tests.Http1;

public class Http1ResponseParserTests
{
    private static readonly Http1ResponseLimits Limits = Http1ResponseLimits.Default;

    // Owned by one test.
    private sealed class ResponseSink : IHttp1ResponseSink
    {
        public Http1Version Version { get; private set; }
        public int Status { get; private set; }
        public string? Reason { get; private set; }
        public int StatusLineCalls { get; private set; }
        public List<(string Name, string Value)> Fields { get; } = new();

        public void OnStatusLine(Http1Version version, int statusCode, ReadOnlySpan<byte> reason)
        {
            StatusLineCalls++;
            Version = version;
            Status = statusCode;
            Reason = Encoding.Latin1.GetString(reason);
        }

        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) =>
            Fields.Add((Encoding.ASCII.GetString(name), Encoding.Latin1.GetString(value)));
    }

    private static (bool Complete, Http1ResponseHead Head, ResponseSink Sink, long Consumed) Parse(
        ReadOnlySequence<byte> buffer, bool head = false, Http1ResponseLimits? limits = null)
    {
        var sink = new ResponseSink();
        var complete = Http1ResponseParser.TryParseHead(buffer, sink, limits ?? Limits, head, out var result, out var consumed);
        return (complete, result, sink, buffer.Slice(buffer.Start, consumed).Length);
    }

    private static (bool Complete, Http1ResponseHead Head, ResponseSink Sink, long Consumed) Parse(
        string text, bool head = false, Http1ResponseLimits? limits = null) =>
        Parse(new ReadOnlySequence<byte>(Encoding.Latin1.GetBytes(text)), head, limits);

    private static Http1ParseException Reject(string text, Http1ResponseLimits? limits = null) =>
        Assert.Throws<Http1ParseException>(() => Parse(text, limits: limits));

    // ---- Valid heads ----

    [Fact]
    public void TryParseHead_ContentLength_ParsesStatusFieldsAndFraming()
    {
        const string head = "HTTP/1.1 200 OK\r\nContent-Type:  text/plain \t\r\nContent-Length: 5\r\n\r\n";
        var r = Parse(head + "hello");

        Assert.True(r.Complete);
        Assert.Equal(Http1Version.Http11, r.Sink.Version);
        Assert.Equal(200, r.Sink.Status);
        Assert.Equal("OK", r.Sink.Reason);
        Assert.Equal(new[] { ("Content-Type", "text/plain"), ("Content-Length", "5") }, r.Sink.Fields);
        Assert.Equal(200, r.Head.StatusCode);
        Assert.Equal(Http1BodyFraming.ContentLength, r.Head.Framing);
        Assert.Equal(5, r.Head.ContentLength);
        Assert.True(r.Head.KeepAlive);
        Assert.Equal(head.Length, r.Consumed);
        Assert.Equal(head.Length, r.Head.HeadLength);
    }

    [Fact]
    public void TryParseHead_Chunked_ChunkedFraming()
    {
        var r = Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n");
        Assert.Equal(Http1BodyFraming.Chunked, r.Head.Framing);
        Assert.Equal(-1, r.Head.ContentLength);
        Assert.True(r.Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_NoLength_ReadUntilCloseAndNotKeptAlive()
    {
        var r = Parse("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
        Assert.Equal(Http1BodyFraming.UntilClose, r.Head.Framing);
        Assert.False(r.Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_ContentLengthZero_NoBodyKeptAlive()
    {
        var r = Parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        Assert.Equal(Http1BodyFraming.None, r.Head.Framing);
        Assert.Equal(0, r.Head.ContentLength);
        Assert.True(r.Head.KeepAlive);
    }

    [Theory]
    [InlineData("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", false)]
    [InlineData("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", false)]
    [InlineData("HTTP/1.1 100 Continue\r\n\r\n", false)]
    [InlineData("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", false)]
    [InlineData("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", true)]
    [InlineData("HTTP/1.1 200 OK\r\n\r\n", true)]
    public void TryParseHead_HeadRequestOrNoBodyStatus_NoBodyWhateverTheFields(string text, bool requestWasHead)
    {
        var r = Parse(text, requestWasHead);
        Assert.Equal(Http1BodyFraming.None, r.Head.Framing);
        Assert.True(r.Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_HeadRequest_ContentLengthStillReported()
    {
        Assert.Equal(7, Parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", head: true).Head.ContentLength);
    }

    [Theory]
    [InlineData("HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")]
    [InlineData("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")]
    public void TryParseHead_CloseOrHttp10_NotKeptAlive(string text)
    {
        Assert.False(Parse(text).Head.KeepAlive);
    }

    [Theory]
    [InlineData("HTTP/1.1 200 \r\n\r\n", "")]
    [InlineData("HTTP/1.1 200\r\n\r\n", "")]
    [InlineData("HTTP/1.1 404 Not  Found\t!\r\n\r\n", "Not  Found\t!")]
    [InlineData("HTTP/1.1 599 caf\u00e9\r\n\r\n", "caf\u00e9")]
    public void TryParseHead_ReasonPhrase_EmptyMissingOrAnyText(string text, string reason)
    {
        var r = Parse(text);
        Assert.True(r.Complete);
        Assert.Equal(reason, r.Sink.Reason);
    }

    [Fact]
    public void TryParseHead_IdenticalContentLengths_AcceptedAsOne()
    {
        var r = Parse("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n");
        Assert.Equal(Http1BodyFraming.ContentLength, r.Head.Framing);
        Assert.Equal(5, r.Head.ContentLength);
    }

    // ---- Partial input ----

    public static TheoryData<string> SplitCases => new()
    {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  v \r\n\r\n",
        "HTTP/1.0 404 Not Found\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    };

    [Theory]
    [MemberData(nameof(SplitCases))]
    public void TryParseHead_EveryPrefix_NeedsMoreDataWithoutSideEffects(string text) =>
        HeadParserAssert.EveryPrefixNeedsMoreData(text, ParseOutcome);

    [Theory]
    [MemberData(nameof(SplitCases))]
    public void TryParseHead_SplitAcrossSegmentsAtEveryPoint_SameResult(string text) =>
        HeadParserAssert.SplitAtEveryPointSameResult(text, ParseOutcome);

    private static HeadParserAssert.Outcome ParseOutcome(ReadOnlySequence<byte> buffer)
    {
        var r = Parse(buffer);
        var observed = r.Sink.StatusLineCalls == 0 && r.Sink.Fields.Count == 0
            ? ""
            : $"{r.Head} {r.Sink.Status} {r.Sink.Reason} {string.Join(";", r.Sink.Fields)}";
        return new(r.Complete, r.Consumed, observed);
    }

    public static TheoryData<string> RejectedSplitCases => new()
    {
        // Limits (64-octet head, 2 fields): before and after the head ends, and past the copy a multi-segment buffer is
        // parsed from.
        "HTTP/1.1 200 OK\r\nX-Long: " + new string('a', 64),
        "HTTP/1.1 200 " + new string('a', 300),
        "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        // Smuggling vectors.
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\nX: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\n obs-fold\r\n\r\n",
    };

    [Theory]
    [MemberData(nameof(RejectedSplitCases))]
    public void TryParseHead_RejectedHeadSplitAcrossSegments_SameError(string text) =>
        HeadParserAssert.SplitAtEveryPointSameError(text, buffer => Parse(buffer, limits: new Http1ResponseLimits(64, 2)));

    // ---- Smuggling vectors and invalid heads: one test each ----

    [Fact]
    public void TryParseHead_DuplicateContentLengthDifferentValues_Rejected()
    {
        Assert.Contains("Conflicting", Reject("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ContentLengthListDifferentValues_Rejected()
    {
        Assert.Contains("Conflicting", Reject("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ContentLengthAndTransferEncoding_Rejected()
    {
        Assert.Contains("Both", Reject("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_TransferEncodingGzip_Rejected()
    {
        Assert.Contains("final", Reject("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ChunkedNotFinal_Rejected()
    {
        Assert.Contains("final", Reject("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_CodingOtherThanChunked_Rejected()
    {
        Assert.Contains("Unsupported transfer coding", Reject("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ChunkedTwice_Rejected()
    {
        Assert.Contains("once", Reject("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_TransferEncodingInHttp10_Rejected()
    {
        Assert.Contains("HTTP/1.0", Reject("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").Reason);
    }

    [Theory]
    [InlineData("-1", "Invalid Content-Length")]
    [InlineData("+5", "Invalid Content-Length")]
    [InlineData("abc", "Invalid Content-Length")]
    [InlineData("", "Invalid Content-Length")]
    [InlineData("99999999999999999999", "overflow")]
    public void TryParseHead_BadContentLength_Rejected(string value, string reasonPart)
    {
        Assert.Contains(reasonPart, Reject($"HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_BareLfInStatusLine_Rejected()
    {
        Assert.Contains("Bare LF", Reject("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_BareLfInFieldLine_Rejected()
    {
        Assert.Contains("Bare LF", Reject("HTTP/1.1 200 OK\r\nContent-Length: 0\nX: y\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_BareLfEndingHead_Rejected()
    {
        Assert.Contains("Bare LF", Reject("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n").Reason);
    }

    [Fact]
    public void TryParseHead_BareCrInReason_Rejected()
    {
        Assert.Contains("reason phrase", Reject("HTTP/1.1 200 O\rK\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_BareCrInValue_Rejected()
    {
        Assert.Contains("Invalid character", Reject("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ObsFold_Rejected()
    {
        Assert.Contains("folding", Reject("HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_SpaceBeforeColon_Rejected()
    {
        Assert.Contains("Whitespace", Reject("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello").Reason);
    }

    [Fact]
    public void TryParseHead_NulInValue_Rejected()
    {
        Assert.Contains("Invalid character", Reject("HTTP/1.1 200 OK\r\nX-A: a\0b\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_FieldNameNotToken_Rejected()
    {
        Assert.Contains("field name", Reject("HTTP/1.1 200 OK\r\nX(A): b\r\n\r\n").Reason);
    }

    [Theory]
    [InlineData("HTTP/1.1 20 OK\r\n\r\n")]
    [InlineData("HTTP/1.1 2000 OK\r\n\r\n")]
    [InlineData("HTTP/1.1 abc OK\r\n\r\n")]
    [InlineData("HTTP/1.1 099 Low\r\n\r\n")]
    [InlineData("HTTP/1.1 600 High\r\n\r\n")]
    [InlineData("HTTP/1.1  200 OK\r\n\r\n")]
    public void TryParseHead_BadStatusCode_Rejected(string text)
    {
        Assert.Contains("status code", Reject(text).Reason);
    }

    [Theory]
    [InlineData("HTTP/2.0 200 OK\r\n\r\n")]
    [InlineData("HTTP/1.2 200 OK\r\n\r\n")]
    public void TryParseHead_UnsupportedVersion_Rejected(string text)
    {
        Assert.Contains("Unsupported HTTP version", Reject(text).Reason);
    }

    [Theory]
    [InlineData("http/1.1 200 OK\r\n\r\n")]
    [InlineData("ICY 200 OK\r\n\r\n")]
    [InlineData("\r\nHTTP/1.1 200 OK\r\n\r\n")]
    [InlineData(" HTTP/1.1 200 OK\r\n\r\n")]
    public void TryParseHead_NotAStatusLine_Rejected(string text)
    {
        Assert.Contains("Invalid status line", Reject(text).Reason);
    }

    [Fact]
    public void TryParseHead_HeadTooLarge_RejectedBeforeComplete()
    {
        var limits = new Http1ResponseLimits(64, 100);
        Assert.True(Parse("HTTP/1.1 200 OK\r\nX: 1\r\n\r\n", limits: limits).Complete);
        // No end of head yet, but already beyond the limit: rejected without waiting for more.
        Assert.Contains("too large", Reject("HTTP/1.1 200 OK\r\nX-Long: " + new string('a', 64), limits).Reason);
        Assert.Contains("too large", Reject("HTTP/1.1 200 " + new string('a', 64), limits).Reason);
    }

    [Fact]
    public void TryParseHead_TooManyFields_Rejected()
    {
        var limits = new Http1ResponseLimits(4096, 2);
        Assert.True(Parse("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n", limits: limits).Complete);
        Assert.Contains("Too many response header fields", Reject("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits).Reason);
    }
}
