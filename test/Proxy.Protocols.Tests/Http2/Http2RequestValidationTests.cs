using Proxy.Codecs.Http2;
using Proxy.Protocols.Http2;
using Proxy.Testing.Http2;

namespace Proxy.Protocols.Tests.Http2;

/// <summary>RFC 9113 §8.1.1, §8.2, §8.3: a malformed request is a PROTOCOL_ERROR stream error and never reaches the app.</summary>
public class Http2RequestValidationTests
{
    private static List<KeyValuePair<string, string>> H(params (string Name, string Value)[] fields)
        => fields.Select(f => new KeyValuePair<string, string>(f.Name, f.Value)).ToList();

    public static TheoryData<string, List<KeyValuePair<string, string>>> MalformedRequests => new()
    {
        { "uppercase_name", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("X-Upper", "1")) },
        { "connection", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("connection", "keep-alive")) },
        { "keep_alive", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("keep-alive", "5")) },
        { "proxy_connection", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("proxy-connection", "x")) },
        { "transfer_encoding", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("transfer-encoding", "chunked")) },
        { "upgrade", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("upgrade", "h2c")) },
        { "te_gzip", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("te", "gzip")) },
        { "status_in_request", H((":status", "200"), (":method", "GET"), (":scheme", "http"), (":path", "/")) },
        { "unknown_pseudo", H((":method", "GET"), (":scheme", "http"), (":path", "/"), (":foo", "bar")) },
        { "duplicate_method", H((":method", "GET"), (":method", "GET"), (":scheme", "http"), (":path", "/")) },
        { "duplicate_path", H((":method", "GET"), (":scheme", "http"), (":path", "/"), (":path", "/")) },
        { "pseudo_after_regular", H((":method", "GET"), (":scheme", "http"), ("x-a", "1"), (":path", "/")) },
        { "empty_path", H((":method", "GET"), (":scheme", "http"), (":path", "")) },
        { "missing_path", H((":method", "GET"), (":scheme", "http")) },
        { "missing_method", H((":scheme", "http"), (":path", "/")) },
        { "missing_scheme", H((":method", "GET"), (":path", "/")) },
        { "connect_with_path", H((":method", "CONNECT"), (":authority", "x:443"), (":path", "/")) },
        { "connect_without_authority", H((":method", "CONNECT")) },
        { "value_nul", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", "a\0b")) },
        { "value_cr", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", "a\rb")) },
        { "value_lf", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", "a\nb")) },
        { "value_leading_space", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", " a")) },
        { "value_trailing_tab", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", "a\t")) },
        { "method_with_space", H((":method", "GET / HTTP/1.1"), (":scheme", "http"), (":path", "/")) },
        { "path_with_space", H((":method", "GET"), (":scheme", "http"), (":path", "/a b")) },
        { "bad_content_length", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("content-length", "12a")) },
        // RFC 9113 §8.3.1: no userinfo in :authority; :authority and Host, when present, not empty; one of them present.
        { "authority_userinfo", H((":method", "GET"), (":scheme", "http"), (":authority", "user@localhost"), (":path", "/")) },
        { "authority_userinfo_password", H((":method", "GET"), (":scheme", "http"), (":authority", "user:pw@localhost:80"), (":path", "/")) },
        { "authority_empty", H((":method", "GET"), (":scheme", "http"), (":authority", ""), (":path", "/")) },
        { "authority_invalid_char", H((":method", "GET"), (":scheme", "http"), (":authority", "local\"host"), (":path", "/")) },
        { "authority_duplicate", H((":method", "GET"), (":scheme", "http"), (":authority", "localhost"), (":authority", "localhost"), (":path", "/")) },
        { "host_userinfo", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("host", "user@localhost")) },
        { "host_empty", H((":method", "GET"), (":scheme", "http"), (":authority", "localhost"), (":path", "/"), ("host", "")) },
        { "host_duplicate", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("host", "localhost"), ("host", "other")) },
        { "no_authority_nor_host", H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("x-a", "1")) },
        // :scheme is an RFC 3986 scheme and the connection's own (cleartext here: "http").
        { "scheme_https_on_cleartext", H((":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/")) },
        { "scheme_with_authority", H((":method", "GET"), (":scheme", "http://x"), (":authority", "localhost"), (":path", "/")) },
        { "scheme_empty", H((":method", "GET"), (":scheme", ""), (":authority", "localhost"), (":path", "/")) },
        { "connect_authority_userinfo", H((":method", "CONNECT"), (":authority", "user@example.com:443")) },
    };

    public static TheoryData<string, List<KeyValuePair<string, string>>> AlternateSchemeRequests => new()
    {
        // Even with alternates allowed a :scheme must be a scheme.
        { "scheme_with_authority", H((":method", "GET"), (":scheme", "http://x"), (":authority", "localhost"), (":path", "/")) },
        { "scheme_leading_digit", H((":method", "GET"), (":scheme", "1http"), (":authority", "localhost"), (":path", "/")) },
        { "authority_userinfo", H((":method", "GET"), (":scheme", "https"), (":authority", "user@localhost"), (":path", "/")) },
    };

    [Theory]
    [MemberData(nameof(AlternateSchemeRequests))]
    public async Task HEADERS_MalformedWithAlternateSchemesAllowed_ProtocolStreamError(string caseName, List<KeyValuePair<string, string>> headers)
    {
        var calls = 0;
        await using var peer = await Http2TestPeer.StartAsync(_ =>
        {
            Interlocked.Increment(ref calls);
            return Task.CompletedTask;
        }, new Http2Options { AllowAlternateSchemes = true });
        await peer.HandshakeAsync();

        await peer.SendHeaderBlockAsync(1, Http2TestPeer.EncodeHeadersRaw(headers), endStream: true, endHeaders: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        await peer.SendRequestHeadersAsync(3);
        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
        Assert.True(Volatile.Read(ref calls) == 1, $"{caseName}: the app saw {calls} requests.");
    }

    [Fact]
    public async Task HEADERS_AlternateSchemeAllowed_AppSeesTheRequestScheme()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-scheme", exchange.Scheme);
            return Task.CompletedTask;
        }, new Http2Options { AllowAlternateSchemes = true });
        await peer.HandshakeAsync();

        await peer.SendHeadersAsync(1, H((":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/")), endStream: true);

        Assert.Equal("https", (await peer.ExpectHeadersAsync(1))["x-scheme"]);
    }

    [Fact]
    public async Task HEADERS_SchemeInUppercase_AppSeesConnectionScheme()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-scheme", exchange.Scheme);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendHeadersAsync(1, H((":method", "GET"), (":scheme", "HTTP"), (":authority", "localhost"), (":path", "/")), endStream: true);

        Assert.Equal("http", (await peer.ExpectHeadersAsync(1))["x-scheme"]);
    }

    [Fact]
    public async Task HEADERS_HostDiffersFromAuthority_AuthorityWinsAndReplacesHost()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-authority", exchange.Authority);
            exchange.ResponseHeaders.Add("x-host", string.Join(",", exchange.RequestHeaders.Where(f => f.Key == "host").Select(f => f.Value)));
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendHeadersAsync(1, H((":method", "GET"), (":scheme", "http"), (":authority", "served.example"), (":path", "/"), ("host", "evil.example")), endStream: true);

        var response = await peer.ExpectHeadersAsync(1);
        Assert.Equal("served.example", response["x-authority"]);
        Assert.Equal("served.example", response["x-host"]);
    }

    [Fact]
    public async Task HEADERS_HostWithoutAuthority_HostIsTheAuthority()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-authority", exchange.Authority);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendHeadersAsync(1, H((":method", "GET"), (":scheme", "http"), (":path", "/"), ("host", "h.example:8080")), endStream: true);

        Assert.Equal("h.example:8080", (await peer.ExpectHeadersAsync(1))["x-authority"]);
    }

    [Theory]
    [MemberData(nameof(MalformedRequests))]
    public async Task HEADERS_MalformedRequest_ProtocolStreamErrorAndAppNotCalled(string caseName, List<KeyValuePair<string, string>> headers)
    {
        var calls = 0;
        await using var peer = await Http2TestPeer.StartAsync(_ =>
        {
            Interlocked.Increment(ref calls);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendHeaderBlockAsync(1, Http2TestPeer.EncodeHeadersRaw(headers), endStream: true, endHeaders: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
        // The connection carries on: a good request on the next stream still works, and only it reached the app.
        await peer.SendRequestHeadersAsync(3);
        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
        Assert.True(Volatile.Read(ref calls) == 1, $"{caseName}: the app saw {calls} requests.");
    }

    [Fact]
    public async Task HEADERS_MalformedRequest_NeverReachesApp()
    {
        var paths = new List<string>();
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            lock (paths) paths.Add(exchange.RawTarget);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();
        await peer.SendHeadersAsync(1, H((":method", "GET"), (":scheme", "http"), (":path", "/bad"), ("connection", "close")), endStream: true);
        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);

        await peer.SendRequestHeadersAsync(3, path: "/good");
        await peer.ReadResponseAsync(3);

        lock (paths) Assert.Equal(new[] { "/good" }, paths);
    }

    [Fact]
    public async Task HEADERS_TeTrailers_Accepted()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-te", exchange.RequestHeaders.Get("te") ?? "");
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, extra: ("te", "trailers"));

        Assert.Equal("trailers", (await peer.ExpectHeadersAsync(1))["x-te"]);
    }

    [Fact]
    public async Task HEADERS_Connect_WithOnlyMethodAndAuthority_Accepted()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange =>
        {
            exchange.ResponseHeaders.Add("x-authority", exchange.Authority);
            return Task.CompletedTask;
        });
        await peer.HandshakeAsync();

        await peer.SendHeadersAsync(1, H((":method", "CONNECT"), (":authority", "example.com:443")), endStream: true);

        Assert.Equal("example.com:443", (await peer.ExpectHeadersAsync(1))["x-authority"]);
    }

    [Fact]
    public async Task Trailers_WithPseudoHeader_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => Task.Delay(Timeout.Infinite, exchange.RequestAborted));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", endStream: false);

        await peer.SendHeadersAsync(1, H((":path", "/x")), endStream: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task DATA_MoreThanContentLength_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => Task.Delay(Timeout.Infinite, exchange.RequestAborted));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", false, ("content-length", "3"));

        await peer.SendDataAsync(1, new byte[4], endStream: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task DATA_LessThanContentLength_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(exchange => Task.Delay(Timeout.Infinite, exchange.RequestAborted));
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1, "POST", "/", false, ("content-length", "10"));

        await peer.SendDataAsync(1, new byte[4], endStream: true);

        await peer.ExpectRstStreamAsync(1, Http2ErrorCode.ProtocolError);
    }

    [Fact]
    public async Task HEADERS_ContentLengthWithoutBody_ProtocolStreamError()
    {
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, "POST", "/", false, ("content-length", "5"));
        await peer.SendDataAsync(1, Array.Empty<byte>(), endStream: true);

        var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        if (frame.Type == Http2FrameType.Headers)
        {
            // The handler may answer before END_STREAM arrives; the reset must still follow.
            frame = await peer.ReceiveSkippingWindowUpdatesAsync();
        }
        Assert.Equal(Http2FrameType.RstStream, frame.Type);
    }

    [Fact]
    public async Task HEADERS_OverMaxHeaderListSize_Responds431AndConnectionContinues()
    {
        var options = new Http2Options { MaxHeaderListSize = 400 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.HandshakeAsync();

        // About 600 bytes decoded: over the limit, under twice the limit (which would be abuse).
        await peer.SendRequestHeadersAsync(1, extra: ("x-big", new string('a', 400)));

        var headers = await peer.ExpectHeadersAsync(1);
        Assert.Equal("431", headers[":status"]);
        Assert.True(headers.EndStream);
        await peer.SendRequestHeadersAsync(3);
        Assert.Equal("200", (await peer.ReadResponseAsync(3)).Status);
    }

    [Fact]
    public async Task HEADERS_OverMaxHeaderCount_Responds431()
    {
        var options = new Http2Options { MaxHeaderCount = 5 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.HandshakeAsync();

        await peer.SendRequestHeadersAsync(1, extra: [("x-1", "1"), ("x-2", "2")]);

        Assert.Equal("431", (await peer.ExpectHeadersAsync(1))[":status"]);
    }

    [Fact]
    public async Task HEADERS_DecodedListOverTwiceTheBudget_EnhanceYourCalm()
    {
        var options = new Http2Options { MaxHeaderListSize = 1000 };
        await using var peer = await Http2TestPeer.StartAsync(_ => Task.CompletedTask, options);
        await peer.HandshakeAsync();
        // HPACK bomb shape: one literal added to the dynamic table, then referenced many times by 1-byte indexes.
        var first = peer.EncodeHeaders([new(":method", "GET"), new(":scheme", "http"), new(":authority", "localhost"), new(":path", "/"), new("x-bomb", new string('b', 500))]);
        await peer.SendHeaderBlockAsync(1, first[..], endStream: true, endHeaders: true);
        await peer.ReadResponseAsync(1);
        var block = Enumerable.Repeat((byte)0xbe, 10).ToArray(); // index 62: the 500-byte entry, ten times

        await peer.SendHeaderBlockAsync(3, block, endStream: true, endHeaders: true);

        await peer.ExpectGoAwayAndCloseAsync(Http2ErrorCode.EnhanceYourCalm);
    }

    [Fact]
    public async Task HEADERS_BeyondMaxConcurrentStreams_RefusedStream()
    {
        var options = new Http2Options { MaxConcurrentStreams = 2 };
        await using var peer = await Http2TestPeer.StartAsync(exchange => Task.Delay(Timeout.Infinite, exchange.RequestAborted), options);
        await peer.HandshakeAsync();
        await peer.SendRequestHeadersAsync(1);
        await peer.SendRequestHeadersAsync(3);

        await peer.SendRequestHeadersAsync(5);

        await peer.ExpectRstStreamAsync(5, Http2ErrorCode.RefusedStream);
    }
}
