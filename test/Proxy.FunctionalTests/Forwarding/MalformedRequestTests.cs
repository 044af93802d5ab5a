using System.Net;
using System.Net.Sockets;
using System.Text;
using Proxy.Codecs.Http2;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests.Forwarding;

/// <summary>
/// Malformed requests sent by a scripted HTTP/2 peer (and a raw HTTP/1.1 socket) to the proxy's cleartext port:
/// the server rejects each one and the backend's /count endpoint never sees it (ANCHORS.md, smuggling rules).
/// </summary>
public sealed class MalformedRequestTests(FailureProxyFixture fixture) : IClassFixture<FailureProxyFixture>
{
    public static TheoryData<ServerKind, string> Cases()
    {
        var data = new TheoryData<ServerKind, string>();
        foreach (var kind in Enum.GetValues<ServerKind>())
        {
            foreach (var name in s_cases.Keys)
            {
                data.Add(kind, name);
            }
        }

        return data;
    }

    /// <summary>Each case: the header list for a request to <c>path</c>, and a body (null = END_STREAM on HEADERS).</summary>
    private static readonly Dictionary<string, Func<string, (List<KeyValuePair<string, string>> Headers, byte[]? Body)>> s_cases = new()
    {
        // RFC 9113 §8.2.1: field names MUST be lowercase.
        ["uppercase-name"] = path => (Request("GET", path, ("X-Upper", "1")), null),
        // RFC 9113 §8.2.2: connection-specific fields MUST NOT appear.
        ["connection"] = path => (Request("GET", path, ("connection", "keep-alive")), null),
        // RFC 9113 §8.2.2: TE may only carry "trailers".
        ["te-gzip"] = path => (Request("GET", path, ("te", "gzip")), null),
        // RFC 9113 §8.2.1: a value MUST NOT start with whitespace.
        ["leading-space"] = path => (Request("GET", path, ("x-value", " padded")), null),
        // RFC 9113 §8.3.1 / RFC 3986: no space in :path.
        ["path-space"] = path => (Request("GET", path + " HTTP/1.1"), null),
        // RFC 9113 §8.3: a pseudo-header field MUST NOT appear twice.
        ["duplicate-method"] = path => ([new(":method", "GET"), .. Request("POST", path)], null),
        // RFC 9113 §8.1.1: DATA beyond the declared content-length is malformed.
        ["content-length-mismatch"] = path => (Request("POST", path, ("content-length", "3")), Encoding.ASCII.GetBytes("more than three")),
        // RFC 9113 §8.3.1: ":authority MUST NOT include the deprecated userinfo subcomponent".
        ["authority-userinfo"] = path => (Request("GET", path, "http", "user@127.0.0.1"), null),
        // RFC 9113 §8.3.1: ":authority" and Host, when present, MUST NOT be empty.
        ["authority-empty"] = path => (Request("GET", path, "http", ""), null),
        // RFC 9110 §7.2: Host is uri-host [":" port], no userinfo (and here it is the only authority).
        ["host-userinfo"] = path => (Request("GET", path, "http", null, ("host", "user@127.0.0.1")), null),
        // The connection is cleartext: ":scheme https" would make the app believe the request came over TLS.
        ["scheme-https-on-cleartext"] = path => (Request("GET", path, "https", "127.0.0.1"), null),
        // RFC 3986 §3.1: a scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
        ["scheme-not-a-scheme"] = path => (Request("GET", path, "http://x", "127.0.0.1"), null),
    };

    private static List<KeyValuePair<string, string>> Request(string method, string path, params (string Name, string Value)[] extra) =>
        Request(method, path, "http", "127.0.0.1", extra);

    /// <summary>A request with this :scheme and :authority (none when <paramref name="authority"/> is null).</summary>
    private static List<KeyValuePair<string, string>> Request(string method, string path, string scheme, string? authority,
        params (string Name, string Value)[] extra) =>
    [
        new(":method", method),
        new(":scheme", scheme),
        .. authority is null ? [] : new KeyValuePair<string, string>[] { new(":authority", authority) },
        new(":path", path),
        .. extra.Select(e => new KeyValuePair<string, string>(e.Name, e.Value)),
    ];

    [Theory]
    [MemberData(nameof(Cases))]
    public async Task MalformedHttp2Request_Rejected_BackendSeesNothing(ServerKind kind, string name)
    {
        var proxy = await fixture.ProxyAsync(kind);
        var id = Guid.NewGuid().ToString("N");
        var (headers, body) = s_cases[name]($"/count/{id}");
        await using var peer = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, proxy.H2cAddress.Port));
        await peer.HandshakeAsync();

        // Raw literals: the peer's encoder would not lowercase anything, but this states the bytes exactly.
        await peer.SendHeaderBlockAsync(1, Http2TestPeer.EncodeHeadersRaw(headers), endStream: body is null, endHeaders: true);
        if (body is not null)
        {
            await peer.SendDataAsync(1, body, endStream: true);
        }

        var rejection = await ReadRejectionAsync(peer);
        if (kind == ServerKind.ProxyServer)
        {
            Assert.Equal("RST_STREAM PROTOCOL_ERROR", rejection);
        }
        else
        {
            // Kestrel 10 rejects most of these itself; a leading-space value and a :path with a space
            // reach the app, where the forwarder's own guard (RequestValidator) answers 400.
            Assert.Contains(rejection, new[] { "RST_STREAM PROTOCOL_ERROR", "GOAWAY PROTOCOL_ERROR", "400" });
        }

        await AssertBackendSawNothingAsync(kind, id);
    }

    /// <summary>
    /// RFC 9113 §8.3.1: with ":authority" present the recipient MUST NOT use Host. The request is served for its
    /// :authority on both servers (Host is replaced by it, as Kestrel does), so X-Forwarded-Host names that authority,
    /// never the Host field the client added beside it.
    /// </summary>
    [Theory]
    [InlineData(ServerKind.Kestrel)]
    [InlineData(ServerKind.ProxyServer)]
    public async Task Http2HostDiffersFromAuthority_ForwardedAsTheAuthority(ServerKind kind)
    {
        var proxy = await fixture.ProxyAsync(kind);
        var path = $"/count/{Guid.NewGuid():N}";
        await using var peer = await Http2TestPeer.ConnectAsync(new IPEndPoint(IPAddress.Loopback, proxy.H2cAddress.Port));
        await peer.HandshakeAsync();

        await peer.SendHeaderBlockAsync(1, Http2TestPeer.EncodeHeadersRaw(Request("GET", path, "http", "served.example", ("host", "evil.example"))),
            endStream: true, endHeaders: true);
        var response = await peer.ReadResponseAsync(1);

        Assert.Equal("200", response.Status);
        Assert.Equal("served.example", response.Headers["x-seen-forwarded-host"]);
        Assert.Equal("http", response.Headers["x-seen-forwarded-proto"]);
        Assert.Contains(path, fixture.CountedPaths);
    }

    /// <summary>HTTP/1.1: an absolute-form target names the authority; a Host naming another is refused (400, as Kestrel does).</summary>
    [Theory]
    [InlineData(ServerKind.Kestrel, "GET http://served.example{0} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")]
    [InlineData(ServerKind.ProxyServer, "GET http://served.example{0} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")]
    [InlineData(ServerKind.Kestrel, "GET {0} HTTP/1.1\r\nHost: user@127.0.0.1\r\nConnection: close\r\n\r\n")]
    [InlineData(ServerKind.ProxyServer, "GET {0} HTTP/1.1\r\nHost: user@127.0.0.1\r\nConnection: close\r\n\r\n")]
    [InlineData(ServerKind.ProxyServer, "GET http://user@served.example{0} HTTP/1.1\r\nHost: served.example\r\nConnection: close\r\n\r\n")]
    public async Task Http11BadAuthority_400_BackendSeesNothing(ServerKind kind, string requestFormat)
    {
        var proxy = await fixture.ProxyAsync(kind);
        var id = Guid.NewGuid().ToString("N");
        using var socket = new Socket(SocketType.Stream, ProtocolType.Tcp);
        await socket.ConnectAsync(IPAddress.Loopback, proxy.HttpAddress.Port);
        await using var stream = new NetworkStream(socket, ownsSocket: false);

        await stream.WriteAsync(Encoding.ASCII.GetBytes(string.Format(System.Globalization.CultureInfo.InvariantCulture, requestFormat, $"/count/{id}")));
        var answer = await ReadUntilClosedAsync(stream);

        Assert.StartsWith("HTTP/1.1 400", answer);
        await AssertBackendSawNothingAsync(kind, id);
    }

    // NOTE: our server only. Kestrel takes RFC 9112 §6.3's other permitted path: it frames the body by
    // Transfer-Encoding alone and closes the connection after answering, so the proxy forwards one clean request.
    [Theory]
    [InlineData(ServerKind.ProxyServer)]
    public async Task Http11_ContentLengthAndTransferEncoding_BackendSeesNothing(ServerKind kind)
    {
        var proxy = await fixture.ProxyAsync(kind);
        var id = Guid.NewGuid().ToString("N");
        using var socket = new Socket(SocketType.Stream, ProtocolType.Tcp);
        await socket.ConnectAsync(IPAddress.Loopback, proxy.HttpAddress.Port);
        await using var stream = new NetworkStream(socket, ownsSocket: false);
        // The classic smuggling shape: an HTTP/1.1 peer that honours Content-Length would see a second request.
        var request = $"POST /count/{id} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            + $"0\r\n\r\nGET /count/{id}/smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

        await stream.WriteAsync(Encoding.ASCII.GetBytes(request));
        var answer = await ReadUntilClosedAsync(stream);

        Assert.StartsWith("HTTP/1.1 400", answer);
        await AssertBackendSawNothingAsync(kind, id);
    }

    /// <summary>How the server refused stream 1: "RST_STREAM code", "GOAWAY code" or the response status.</summary>
    private static async Task<string> ReadRejectionAsync(Http2TestPeer peer)
    {
        while (true)
        {
            var frame = await peer.ReceiveSkippingWindowUpdatesAsync();
            switch (frame.Type)
            {
                case Http2FrameType.RstStream when frame.StreamId == 1:
                    return "RST_STREAM " + Token(frame.AsRstStream().ErrorCode);
                case Http2FrameType.GoAway:
                    return "GOAWAY " + Token(frame.AsGoAway().ErrorCode);
                case Http2FrameType.Headers when frame.StreamId == 1:
                    return (await peer.DecodeHeaderBlockAsync(frame))[":status"] ?? "no status";
            }
        }
    }

    private static string Token(Http2ErrorCode code) => code == Http2ErrorCode.ProtocolError ? "PROTOCOL_ERROR" : code.ToString();

    private static async Task<string> ReadUntilClosedAsync(Stream stream)
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        var received = new MemoryStream();
        var buffer = new byte[4096];
        int read;
        while ((read = await stream.ReadAsync(buffer, timeout.Token)) > 0)
        {
            received.Write(buffer, 0, read);
        }

        return Encoding.ASCII.GetString(received.ToArray());
    }

    /// <summary>
    /// The backend saw no request of this case, while a well-formed probe sent afterwards through the same proxy
    /// was counted: the route works, so "nothing arrived" is not a dead backend.
    /// </summary>
    private async Task AssertBackendSawNothingAsync(ServerKind kind, string id)
    {
        using var client = TestClients.Create(await fixture.ProxyAsync(kind), HttpTransport.Http2Tls);
        Assert.Equal("counted", await client.GetStringAsync($"/count/probe-{id}"));
        Assert.Contains($"/count/probe-{id}", fixture.CountedPaths);
        Assert.DoesNotContain(fixture.CountedPaths, path => path.Contains(id) && !path.Contains("probe-"));
    }
}
