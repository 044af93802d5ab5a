using System.Net;
using System.Net.Http.Headers;
using Google.Protobuf;
using Proxy.Demo.Grpc.Echo;
using Proxy.Demo.Grpc;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>
/// Our gRPC framing seen on the wire with a raw HttpClient: what grpc-js hides (trailers-only vs trailers,
/// a deadline enforced by the server alone, HTTP-level rejections).
/// </summary>
public sealed class GrpcFramingTests(GrpcAppFixture fixture) : IClassFixture<GrpcAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Cleartext, HttpTransport.Http2Tls);

    private static HttpRequestMessage GrpcRequest(string method, params IMessage[] messages)
    {
        var body = messages.SelectMany(GrpcMessageFraming.Frame).ToArray();
        var request = new HttpRequestMessage(HttpMethod.Post, $"/{EchoService.ServiceName}/{method}")
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new ByteArrayContent(body),
        };
        request.Content.Headers.ContentType = new MediaTypeHeaderValue(GrpcProtocol.ContentType);
        request.Headers.TryAddWithoutValidation("te", "trailers");
        return request;
    }

    private static List<EchoReply> ParseReplies(byte[] body)
    {
        var replies = new List<EchoReply>();
        for (var offset = 0; offset < body.Length;)
        {
            Assert.Equal(0, body[offset]); // not compressed
            var length = System.Buffers.Binary.BinaryPrimitives.ReadInt32BigEndian(body.AsSpan(offset + 1));
            replies.Add(EchoReply.Parser.ParseFrom(body, offset + GrpcProtocol.MessageHeaderSize, length));
            offset += GrpcProtocol.MessageHeaderSize + length;
        }

        return replies;
    }

    private static string Single(HttpHeaders headers, string name) => Assert.Single(headers.GetValues(name));

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Unary_RawHttp2_OneFramedReplyThenGrpcStatusTrailer(ServerKind kind, HttpTransport transport)
    {
        using var client = TestClients.Create(await fixture.GetAsync(kind), transport);

        using var response = await client.SendAsync(GrpcRequest("Unary", new EchoRequest { Message = "raw", Sequence = 3 }));
        var body = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(GrpcProtocol.ContentType, response.Content.Headers.ContentType?.MediaType);
        var reply = Assert.Single(ParseReplies(body));
        Assert.Equal("echo: raw", reply.Message);
        Assert.Equal(3, reply.Sequence);
        Assert.Equal("0", Single(response.TrailingHeaders, GrpcProtocol.StatusHeader));
        Assert.False(response.Headers.Contains(GrpcProtocol.StatusHeader));
    }

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Fail_TrailersOnly_StatusInHeadersAndNoBody(ServerKind kind, HttpTransport transport)
    {
        using var client = TestClients.Create(await fixture.GetAsync(kind), transport);

        using var response = await client.SendAsync(GrpcRequest("Fail", new FailRequest { Code = 7, Detail = "nope: ü" }));
        var body = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Empty(body);
        Assert.Equal("7", Single(response.Headers, GrpcProtocol.StatusHeader));
        Assert.Equal("nope: %C3%BC", Single(response.Headers, GrpcProtocol.MessageHeader));
        Assert.False(response.TrailingHeaders.Contains(GrpcProtocol.StatusHeader));
    }

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Wait_GrpcTimeout100m_ServerEnforcesDeadline(ServerKind kind, HttpTransport transport)
    {
        // HttpClient enforces no gRPC deadline: only the server's reading of grpc-timeout can end this call.
        using var client = TestClients.Create(await fixture.GetAsync(kind), transport);
        var callId = Guid.NewGuid().ToString("N");
        using var request = GrpcRequest("Wait", new WaitRequest { CallId = callId, RepliesFirst = 1 });
        request.Headers.TryAddWithoutValidation(GrpcProtocol.TimeoutHeader, "100m");

        using var response = await client.SendAsync(request);
        var replies = ParseReplies(await response.Content.ReadAsByteArrayAsync());

        Assert.Single(replies);
        Assert.Equal(((int)GrpcStatusCode.DeadlineExceeded).ToString(), Single(response.TrailingHeaders, GrpcProtocol.StatusHeader));
        var outcome = await fixture.Echo.WaitOutcomeAsync(callId).WaitAsync(TimeSpan.FromSeconds(10));
        Assert.Equal("deadline", outcome.EndedBy);
    }

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Unary_NotGrpcContentType_Http415(ServerKind kind, HttpTransport transport)
    {
        using var client = TestClients.Create(await fixture.GetAsync(kind), transport);
        using var request = GrpcRequest("Unary", new EchoRequest { Message = "x" });
        request.Content!.Headers.ContentType = new MediaTypeHeaderValue("application/json");

        using var response = await client.SendAsync(request);

        Assert.Equal(HttpStatusCode.UnsupportedMediaType, response.StatusCode);
    }

    [Theory]
    [MemberData(nameof(Transports))]
    public async Task Unary_TruncatedMessage_InternalStatus(ServerKind kind, HttpTransport transport)
    {
        using var client = TestClients.Create(await fixture.GetAsync(kind), transport);
        using var request = GrpcRequest("Unary", new EchoRequest { Message = "truncated" });
        var framed = await request.Content!.ReadAsByteArrayAsync();
        request.Content = new ByteArrayContent(framed[..^3]);
        request.Content.Headers.ContentType = new MediaTypeHeaderValue(GrpcProtocol.ContentType);

        using var response = await client.SendAsync(request);
        await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(((int)GrpcStatusCode.Internal).ToString(), Single(response.Headers, GrpcProtocol.StatusHeader));
    }
}

public sealed class GrpcProtocolTests
{
    [Theory]
    [InlineData("1H", 36_000_000_000L)]
    [InlineData("2M", 1_200_000_000L)]
    [InlineData("3S", 30_000_000L)]
    [InlineData("250m", 2_500_000L)]
    [InlineData("7u", 70L)]
    [InlineData("1000n", 10L)]
    [InlineData("99999999S", 999_999_990_000_000L)]
    public void TryParseTimeout_ValidValue_Ticks(string value, long ticks)
    {
        Assert.True(GrpcProtocol.TryParseTimeout(value, out var timeout));
        Assert.Equal(ticks, timeout.Ticks);
    }

    [Theory]
    [InlineData("")]
    [InlineData("S")]
    [InlineData("10")]
    [InlineData("10s")]
    [InlineData("-1S")]
    [InlineData("123456789S")]
    [InlineData("1.5S")]
    public void TryParseTimeout_Malformed_False(string value) => Assert.False(GrpcProtocol.TryParseTimeout(value, out _));

    [Theory]
    [InlineData("plain text", "plain text")]
    [InlineData("100%", "100%25")]
    [InlineData("café", "caf%C3%A9")]
    [InlineData("line\nbreak", "line%0Abreak")]
    public void EncodeMessage_PercentEncodesOutsidePrintableAscii_RoundTrips(string message, string encoded)
    {
        Assert.Equal(encoded, GrpcProtocol.EncodeMessage(message));
        Assert.Equal(message, GrpcProtocol.DecodeMessage(encoded));
    }

    [Theory]
    [InlineData("application/grpc", true)]
    [InlineData("application/grpc+proto", true)]
    [InlineData("application/grpc; charset=utf-8", true)]
    [InlineData("application/grpc-web", false)]
    [InlineData("application/json", false)]
    [InlineData(null, false)]
    public void IsGrpcContentType_Value_Expected(string? contentType, bool expected) =>
        Assert.Equal(expected, GrpcProtocol.IsGrpcContentType(contentType));
}
