using System.Buffers;
using System.Text;
using Proxy.Codecs.Http1;
using Proxy.Testing;

namespace Proxy.Codecs.Tests.Http1;

public class Http1RequestParserTests
{
    private static readonly Http1ParserLimits Limits = Http1ParserLimits.Default;

    private static (bool Complete, Http1RequestHead Head, RecordingSink Sink, long Consumed) Parse(ReadOnlySequence<byte> buffer, Http1ParserLimits? limits = null)
    {
        var sink = new RecordingSink();
        var complete = Http1RequestParser.TryParseHead(buffer, sink, limits ?? Limits, out var head, out var consumed);
        return (complete, head, sink, buffer.Slice(buffer.Start, consumed).Length);
    }

    private static (bool Complete, Http1RequestHead Head, RecordingSink Sink, long Consumed) Parse(string text, Http1ParserLimits? limits = null) =>
        Parse(new ReadOnlySequence<byte>(Encoding.Latin1.GetBytes(text)), limits);

    private static Http1ParseException Reject(string text, Http1ParserLimits? limits = null) =>
        Assert.Throws<Http1ParseException>(() => Parse(text, limits));

    [Fact]
    public void TryParseHead_SimpleGet_ParsesRequestLineAndHeaders()
    {
        var r = Parse("GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept:  text/plain \t\r\n\r\nNEXT");

        Assert.True(r.Complete);
        Assert.Equal("GET", r.Sink.Method);
        Assert.Equal("/a/b?c=d", r.Sink.Target);
        Assert.Equal(Http1Version.Http11, r.Head.Version);
        Assert.Equal(Http1TargetForm.Origin, r.Head.TargetForm);
        Assert.Equal(new[] { ("Host", "example.com"), ("Accept", "text/plain") }, r.Sink.Fields);
        Assert.Equal(Http1BodyFraming.None, r.Head.Framing);
        Assert.Equal(-1, r.Head.ContentLength);
        Assert.True(r.Head.KeepAlive);
        Assert.Equal(r.Consumed, r.Head.HeadLength);
        Assert.Equal("GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept:  text/plain \t\r\n\r\n".Length, r.Consumed);
    }

    [Fact]
    public void TryParseHead_AbsoluteForm_Accepted()
    {
        var r = Parse("GET http://example.com:8080/x?y HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n");
        Assert.Equal(Http1TargetForm.Absolute, r.Head.TargetForm);
        Assert.Equal("http://example.com:8080/x?y", r.Sink.Target);
    }

    [Theory]
    [InlineData("GET http://example.com/ HTTP/1.1\r\nHost: example.com:80\r\n\r\n")]
    [InlineData("GET https://example.com:443/ HTTP/1.1\r\nHost: example.com\r\n\r\n")]
    [InlineData("GET http://example.com/ HTTP/1.0\r\n\r\n")]
    public void TryParseHead_AbsoluteFormHostSameAuthority_Accepted(string text)
    {
        Assert.Equal(Http1TargetForm.Absolute, Parse(text).Head.TargetForm);
    }

    [Theory]
    [InlineData("GET http://example.com/ HTTP/1.1\r\nHost: other.example\r\n\r\n", "Host header does not match the request target")]
    [InlineData("GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "Host header does not match the request target")]
    [InlineData("GET https://example.com/ HTTP/1.1\r\nHost: example.com:80\r\n\r\n", "Host header does not match the request target")]
    [InlineData("GET http://user@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "Userinfo in the request target")]
    [InlineData("GET http://user:pw@example.com/ HTTP/1.0\r\n\r\n", "Userinfo in the request target")]
    [InlineData("GET http:///x HTTP/1.1\r\nHost: example.com\r\n\r\n", "Invalid host in the request target")]
    [InlineData("GET http://exa\"mple.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "Invalid host in the request target")]
    public void TryParseHead_AbsoluteFormBadAuthority_400WithReason(string text, string reason)
    {
        var error = Reject(text);
        Assert.Equal(400, error.StatusCode);
        Assert.Equal(reason, error.Reason);
    }

    [Fact]
    public void TryParseHead_HostWithUserinfo_400()
    {
        Assert.Equal("Invalid Host header", Reject("GET / HTTP/1.1\r\nHost: user@example.com\r\n\r\n").Reason);
    }

    [Fact]
    public void TryParseHead_ConnectAuthorityForm_Accepted()
    {
        var r = Parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        Assert.Equal(Http1TargetForm.Authority, r.Head.TargetForm);
        Assert.False(r.Head.HasUpgrade);
    }

    [Fact]
    public void TryParseHead_OptionsAsterisk_Accepted()
    {
        var r = Parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.Equal(Http1TargetForm.Asterisk, r.Head.TargetForm);
    }

    [Theory]
    [InlineData("GET * HTTP/1.1\r\nHost: h\r\n\r\n")]                 // asterisk-form only for OPTIONS
    [InlineData("CONNECT /path HTTP/1.1\r\nHost: h\r\n\r\n")]         // CONNECT needs authority-form
    [InlineData("CONNECT example.com HTTP/1.1\r\nHost: h\r\n\r\n")]   // authority-form needs a port
    [InlineData("GET relative/path HTTP/1.1\r\nHost: h\r\n\r\n")]
    public void TryParseHead_TargetFormNotAllowed_400(string text)
    {
        Assert.Equal(400, Reject(text).StatusCode);
    }

    [Fact]
    public void TryParseHead_Http10WithoutHost_AcceptedAndNotKeptAlive()
    {
        var r = Parse("GET / HTTP/1.0\r\n\r\n");
        Assert.Equal(Http1Version.Http10, r.Head.Version);
        Assert.False(r.Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_Http10KeepAlive_KeptAlive()
    {
        Assert.True(Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_ConnectionClose_NotKeptAlive()
    {
        Assert.False(Parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n").Head.KeepAlive);
    }

    [Fact]
    public void TryParseHead_LeadingEmptyLines_Ignored()
    {
        var r = Parse("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
        Assert.True(r.Complete);
        Assert.Equal("GET", r.Sink.Method);
    }

    [Fact]
    public void TryParseHead_ContentLength_Framing()
    {
        var r = Parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n");
        Assert.Equal(Http1BodyFraming.ContentLength, r.Head.Framing);
        Assert.Equal(42, r.Head.ContentLength);
    }

    [Fact]
    public void TryParseHead_ContentLengthZero_NoBody()
    {
        var r = Parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
        Assert.Equal(Http1BodyFraming.None, r.Head.Framing);
        Assert.Equal(0, r.Head.ContentLength);
    }

    [Fact]
    public void TryParseHead_IdenticalContentLengths_Accepted()
    {
        var r = Parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n");
        Assert.Equal(5, r.Head.ContentLength);
    }

    [Fact]
    public void TryParseHead_Chunked_Framing()
    {
        var r = Parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\nTE: trailers\r\n\r\n");
        Assert.Equal(Http1BodyFraming.Chunked, r.Head.Framing);
        Assert.True(r.Head.ExpectContinue);
        Assert.True(r.Head.AcceptsTrailers);
    }

    [Fact]
    public void TryParseHead_ExpectContinueInHttp10_Ignored()
    {
        Assert.False(Parse("POST / HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n").Head.ExpectContinue);
    }

    [Fact]
    public void TryParseHead_ObsTextInValue_KeptAsLatin1()
    {
        var r = Parse("GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\u00e9\r\n\r\n");
        Assert.Equal("caf\u00e9", r.Sink.Fields[1].Value);
    }

    [Fact]
    public void TryParseHead_EmptyValue_Accepted()
    {
        var r = Parse("GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n");
        Assert.Equal(("X-Empty", ""), r.Sink.Fields[1]);
    }

    // ---- Rejections ----

    [Theory]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "Both")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "Conflicting")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n", "Conflicting")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", "Invalid Content-Length")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", "Invalid Content-Length")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", "Invalid Content-Length")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", "Invalid Content-Length")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", "overflow")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", "final")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "final")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "once")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n", "final")]
    [InlineData("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.0")]
    public void TryParseHead_BadFraming_400(string text, string reasonPart)
    {
        var ex = Reject(text);
        Assert.Equal(400, ex.StatusCode);
        Assert.Contains(reasonPart, ex.Reason, StringComparison.OrdinalIgnoreCase);
    }

    [Theory]
    [InlineData("gzip, chunked")]
    [InlineData("identity, chunked")]
    public void TryParseHead_UnknownTransferCoding_501(string codings)
    {
        Assert.Equal(501, Reject($"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: {codings}\r\n\r\n").StatusCode);
    }

    [Theory]
    [InlineData("GET / HTTP/2.0\r\nHost: h\r\n\r\n")]
    [InlineData("GET / HTTP/1.2\r\nHost: h\r\n\r\n")]
    [InlineData("GET / HTTP/0.9\r\nHost: h\r\n\r\n")]
    public void TryParseHead_UnsupportedVersion_505(string text)
    {
        Assert.Equal(505, Reject(text).StatusCode);
    }

    [Theory]
    [InlineData("GET / http/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("GET / HTTP/1.10\r\nHost: h\r\n\r\n")]
    [InlineData("GET / HTTP/1\r\nHost: h\r\n\r\n")]
    [InlineData("GET /\r\nHost: h\r\n\r\n")]
    [InlineData("GET  / HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("GET /  HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData(" GET / HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("G(T / HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("GET /a\u0001b HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("GET /caf\u00e9 HTTP/1.1\r\nHost: h\r\n\r\n")]
    [InlineData("GET / HTTP/1.1 \r\nHost: h\r\n\r\n")]
    public void TryParseHead_MalformedRequestLine_400(string text)
    {
        Assert.Equal(400, Reject(text).StatusCode);
    }

    [Theory]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A : b\r\n\r\n")]         // whitespace before colon
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A\t: b\r\n\r\n")]
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n  folded\r\n\r\n")] // obs-fold
    [InlineData("GET / HTTP/1.1\r\n Host: h\r\n\r\n")]                   // whitespace before first field
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A b\r\n\r\n")]           // no colon
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\n: b\r\n\r\n")]             // empty name
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX(A): b\r\n\r\n")]         // non-token name
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\0c\r\n\r\n")]       // NUL
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\rc\r\n\r\n")]       // bare CR in value
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\u007fc\r\n\r\n")]   // DEL
    [InlineData("GET / HTTP/1.1\r\nHost: h\nX-A: b\r\n\r\n")]            // bare LF
    [InlineData("GET / HTTP/1.1\nHost: h\r\n\r\n")]                      // bare LF after request line
    [InlineData("GET / HTTP/1.1\r\nHost: h\r\n\n")]                      // bare LF ending the head
    public void TryParseHead_MalformedField_400(string text)
    {
        Assert.Equal(400, Reject(text).StatusCode);
    }

    [Theory]
    [InlineData("GET / HTTP/1.1\r\n\r\n")]
    [InlineData("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")]
    [InlineData("GET / HTTP/1.1\r\nHost: a b\r\n\r\n")]
    [InlineData("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n")]
    public void TryParseHead_BadHost_400(string text)
    {
        Assert.Equal(400, Reject(text).StatusCode);
    }

    // ---- Limits ----

    [Fact]
    public void TryParseHead_RequestLineTooLong_414EvenBeforeLineEnds()
    {
        var limits = new Http1ParserLimits(32, 1024, 10);
        Assert.Equal(414, Reject("GET /" + new string('a', 40), limits).StatusCode);
        Assert.Equal(414, Reject("GET /" + new string('a', 40) + " HTTP/1.1\r\nHost: h\r\n\r\n", limits).StatusCode);
    }

    [Fact]
    public void TryParseHead_RequestLineAtLimit_Accepted()
    {
        var line = "GET /" + new string('a', 32 - "GET / HTTP/1.1".Length) + " HTTP/1.1";
        Assert.Equal(32, line.Length);
        Assert.True(Parse(line + "\r\nHost: h\r\n\r\n", new Http1ParserLimits(32, 1024, 10)).Complete);
    }

    [Fact]
    public void TryParseHead_HeadersTooLarge_431EvenBeforeHeadEnds()
    {
        var limits = new Http1ParserLimits(1024, 64, 10);
        Assert.Equal(431, Reject("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + new string('a', 80), limits).StatusCode);
        Assert.Equal(431, Reject("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + new string('a', 80) + "\r\n\r\n", limits).StatusCode);
    }

    [Fact]
    public void TryParseHead_TooManyHeaders_431()
    {
        var limits = new Http1ParserLimits(1024, 4096, 3);
        Assert.True(Parse("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits).Complete);
        Assert.Equal(431, Reject("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits).StatusCode);
    }

    // ---- Partial input ----

    public static TheoryData<string> SplitCases => new()
    {
        "GET /a?b HTTP/1.1\r\nHost: example.com\r\nX-A:  v \r\n\r\n",
        "\r\nPOST http://h/x HTTP/1.0\r\nContent-Length: 3\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
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
        var observed = r.Sink.RequestLineCalls == 0 && r.Sink.Fields.Count == 0
            ? ""
            : $"{r.Head} {r.Sink.Method} {r.Sink.Target} {string.Join(";", r.Sink.Fields)}";
        return new(r.Complete, r.Consumed, observed);
    }

    public static TheoryData<string> RejectedSplitCases => new()
    {
        // Limits (32-octet request line, 64-octet field section, 3 fields): before and after the line or head ends, and
        // past the copy a multi-segment buffer is parsed from (the bytes after the limit are never looked at).
        "GET /" + new string('a', 40),
        "GET /" + new string('a', 40) + " HTTP/1.1\r\nHost: h\r\n\r\n",
        "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + new string('a', 300),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + new string('a', 80) + "\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        // Malformed lines.
        "GET / HTTP/1.1\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA : 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA: \u0001\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "\rGET / HTTP/1.1\r\n\r\n",
    };

    [Theory]
    [MemberData(nameof(RejectedSplitCases))]
    public void TryParseHead_RejectedHeadSplitAcrossSegments_SameError(string text) =>
        HeadParserAssert.SplitAtEveryPointSameError(text, buffer => Parse(buffer, new Http1ParserLimits(32, 64, 3)));

    [Fact]
    public void TryParseHead_HeadAcrossSegmentsFollowedByMoreThanTheCopyBound_Parses()
    {
        // The head crosses a segment boundary and a large body follows it: the copy stops at the head's bound and the
        // position handed back is in the original buffer.
        var head = Encoding.ASCII.GetBytes("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n");
        var body = new byte[100_000];
        var r = Parse(TestSequence.Create(head[..10], [.. head[10..], .. body[..50_000]], body[50_000..]), new Http1ParserLimits(64, 128, 4));
        Assert.True(r.Complete);
        Assert.Equal(head.Length, r.Consumed);
        Assert.Equal(100_000, r.Head.ContentLength);
        Assert.Equal("/up", r.Sink.Target);
    }

    [Fact]
    public void TryParseHead_OneByteSegments_Parses()
    {
        var bytes = Encoding.ASCII.GetBytes("GET /x HTTP/1.1\r\nHost: h\r\nA: b\r\n\r\n");
        var r = Parse(TestSequence.Create(bytes.Select(b => new[] { b }).ToArray()));
        Assert.True(r.Complete);
        Assert.Equal("/x", r.Sink.Target);
        Assert.Equal(("A", "b"), r.Sink.Fields[1]);
    }
}
