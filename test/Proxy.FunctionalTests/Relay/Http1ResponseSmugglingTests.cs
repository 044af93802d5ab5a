using System.Net;
using System.Text;
using Proxy.Forwarding.Forwarder;
using Proxy.FunctionalTests.Forwarding;
using Proxy.FunctionalTests.Hosting;
using Proxy.Protocols.Client;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// HTTP/1.1 backends that answer with responses a lenient parser would frame differently from a strict one (response
/// splitting and smuggling vectors, RFC 9112 §11.1, §6.3), one raw-bytes backend per vector behind one proxy: route
/// <c>/{vector}/...</c> to cluster <c>{vector}</c> (HTTP/1.1, the default for an http:// destination).
/// </summary>
// Owned by xUnit (one per test class); the backends and the proxy are started once and only read by the tests.
public sealed class Http1ResponseSmugglingFixture : IAsyncLifetime
{
    /// <summary>In every canned body (and header) the backend sends: the client must never see it.</summary>
    public const string Marker = "SMUGGLED-5f1c9e";

    /// <summary>A whole second response, hidden in the first one's body: what a response-splitting attack wants relayed.</summary>
    private const string Smuggled = $"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{Marker}";

    private static readonly int s_smuggledLength = Smuggled.Length;

    /// <summary>
    /// Responses whose head a strict parser rejects (502, never a byte of them relayed), each with the parser's reason: the
    /// proof that the vector was refused for what it is, not for some other flaw of the canned bytes.
    /// </summary>
    public static readonly IReadOnlyDictionary<string, (string Response, string Reason)> HeadVectors = new Dictionary<string, (string, string)>
    {
        ["duplicate-content-length"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nContent-Length: 0\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Conflicting Content-Length"),
        ["content-length-and-chunked"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nContent-Length: {5 + s_smuggledLength}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{Smuggled}",
            "Both Transfer-Encoding and Content-Length"),
        ["chunked-and-content-length"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nTransfer-Encoding: chunked\r\nContent-Length: {5 + s_smuggledLength}\r\n\r\n0\r\n\r\n{Smuggled}",
            "Both Transfer-Encoding and Content-Length"),
        ["bare-lf"] = (
            $"HTTP/1.1 200 OK\nX-Marker: {Marker}\nContent-Length: {s_smuggledLength}\n\n{Smuggled}",
            "Bare LF"),
        ["bare-lf-in-one-field-line"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Bare LF"),
        ["obs-fold"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nX-Folded: first\r\n second\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Obsolete line folding"),
        ["obs-fold-in-content-length"] = (
            $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nContent-Length: 0\r\n {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Obsolete line folding"),
        ["invalid-status-code"] = (
            $"HTTP/1.1 2OO OK\r\nX-Marker: {Marker}\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Invalid status code"),
        ["not-an-http-status-line"] = (
            $"ICY 200 OK\r\nX-Marker: {Marker}\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Invalid status line"),
        ["status-code-without-space"] = (
            $"HTTP/1.1 200OK\r\nX-Marker: {Marker}\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}",
            "Invalid status code"),
    };

    /// <summary>A valid head, then a chunk size of 72 bits: the body's framing breaks after the status line was accepted.</summary>
    public const string ChunkSizeOverflow =
        $"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{Marker}\r\n0\r\n\r\n";

    /// <summary>The control: the same backend and marker, well-formed. Proves the marker would be seen if it were relayed.</summary>
    public static readonly string WellFormed = $"HTTP/1.1 200 OK\r\nX-Marker: {Marker}\r\nContent-Length: {s_smuggledLength}\r\n\r\n{Smuggled}";

    private readonly Dictionary<string, RawHttp1Backend> _backends = new();
    private TestHost? _proxy;

    public TestHost Proxy => _proxy ?? throw new InvalidOperationException("Not started.");

    /// <summary>The forwarder's outcome of every request, by path.</summary>
    public ForwardingOutcomes Outcomes { get; } = new();

    public RawHttp1Backend Backend(string vector) => _backends[vector];

    public async Task InitializeAsync()
    {
        var vectors = HeadVectors.Select(v => KeyValuePair.Create(v.Key, v.Value.Response))
            .Append(new("chunk-size-overflow", ChunkSizeOverflow)).Append(new("well-formed", WellFormed));
        var keys = new ReverseProxyKeys();
        foreach (var (name, response) in vectors)
        {
            var backend = new RawHttp1Backend(response);
            _backends[name] = backend;
            keys.NativeRoute(name, name, backend.Address.ToString(), h2c: false);
        }

        _proxy = await RelayProxy.StartAsync(keys, Outcomes);
    }

    public async Task DisposeAsync()
    {
        if (_proxy is not null)
        {
            await _proxy.DisposeAsync();
        }

        foreach (var backend in _backends.Values)
        {
            await backend.DisposeAsync();
        }
    }
}

/// <summary>Each vector through the relay, from an HTTP/2 client.</summary>
public sealed class Http1ResponseSmugglingTests(Http1ResponseSmugglingFixture fixture) : IClassFixture<Http1ResponseSmugglingFixture>
{
    private const string Marker = Http1ResponseSmugglingFixture.Marker;

    public static TheoryData<string> HeadVectors => new(Http1ResponseSmugglingFixture.HeadVectors.Keys);

    [Theory]
    [MemberData(nameof(HeadVectors))]
    public async Task Get_MalformedResponseHead_502NothingRelayedBackendConnectionClosed(string vector)
    {
        var backend = fixture.Backend(vector);
        using var client = RelayProxy.CreateClient(fixture.Proxy);

        using var response = await client.GetAsync($"/{vector}/resource").WaitAsync(RelayProxy.Bound);
        var received = await response.Content.ReadAsByteArrayAsync();
        var connection = await backend.NextConnectionAsync();

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
        AssertProtocolError(await fixture.Outcomes.ForAsync($"/{vector}/resource"), ForwarderError.Request, Http1ResponseSmugglingFixture.HeadVectors[vector].Reason);
        AssertNoMarker(response, received);
        Assert.Contains(await connection.ClosedByProxy.WaitAsync(RelayProxy.Bound), new[] { "FIN", "RST" });
        Assert.Equal(1, backend.ConnectionCount); // a response it could not frame is not a reason to ask again
    }

    [Fact]
    public async Task Get_ChunkSizeOverflow_200HeadThenStreamResetInternalErrorNoBodyBackendConnectionClosed()
    {
        const string vector = "chunk-size-overflow";
        var backend = fixture.Backend(vector);
        using var client = RelayProxy.CreateClient(fixture.Proxy);

        var outcome = await SendAndReadAsync(client, $"/{vector}/resource");
        var connection = await backend.NextConnectionAsync();

        // The head was valid, so the relay took it: the client gets the 200 head (the relay sends a head it took even when
        // the body failed before it went out), then the stream reset with INTERNAL_ERROR, never an ending and never a byte
        // of the body. A 502 is not possible in general: the head may be on its way before the first chunk arrives.
        Assert.Equal(HttpStatusCode.OK, outcome.Status);
        Assert.True(outcome.Error is not null, $"The client received a complete response: {outcome.Received.Length} bytes.");
        Assert.Equal(0x2, RelayProxy.Http2ErrorCode(outcome.Error));
        AssertProtocolError(await fixture.Outcomes.ForAsync($"/{vector}/resource"), ForwarderError.ResponseBodyDestination, "Chunk size overflow");
        Assert.DoesNotContain(Marker, Encoding.Latin1.GetString(outcome.Received));
        Assert.Contains(await connection.ClosedByProxy.WaitAsync(RelayProxy.Bound), new[] { "FIN", "RST" });
        Assert.Equal(1, backend.ConnectionCount);
    }

    [Fact]
    public async Task Get_WellFormedResponse_200WithTheMarkerRelayed()
    {
        // The control for the tests above: the same harness relays the marker when the response is valid.
        using var client = RelayProxy.CreateClient(fixture.Proxy);

        using var response = await client.GetAsync("/well-formed/resource").WaitAsync(RelayProxy.Bound);
        var body = await response.Content.ReadAsStringAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Contains(Marker, body);
        Assert.Equal(Marker, Assert.Single(response.Headers.GetValues("X-Marker")));
        Assert.Equal(ForwarderError.None, (await fixture.Outcomes.ForAsync("/well-formed/resource")).Error);
    }

    /// <summary>The forwarder's outcome, and the relay's reason: a protocol error of the backend naming the flaw.</summary>
    private static void AssertProtocolError((ForwarderError Error, Exception? Exception) outcome, ForwarderError expected, string reason)
    {
        Assert.Equal(expected, outcome.Error);
        var backendError = Assert.IsType<BackendException>(outcome.Exception);
        Assert.Equal(BackendFailure.ProtocolError, backendError.Failure);
        Assert.Contains(reason, backendError.Message, StringComparison.Ordinal);
    }

    private static void AssertNoMarker(HttpResponseMessage response, byte[] received)
    {
        Assert.DoesNotContain(Marker, Encoding.Latin1.GetString(received));
        var fields = response.Headers.Concat(response.Content.Headers).SelectMany(h => h.Value.Select(v => $"{h.Key}: {v}"));
        Assert.DoesNotContain(fields, f => f.Contains(Marker, StringComparison.Ordinal) || f.StartsWith("X-Folded", StringComparison.OrdinalIgnoreCase));
    }

    private static async Task<(HttpStatusCode? Status, byte[] Received, Exception? Error)> SendAndReadAsync(HttpClient client, string path)
    {
        HttpStatusCode? status = null;
        var received = new MemoryStream();
        try
        {
            using var response = await client.GetAsync(path, HttpCompletionOption.ResponseHeadersRead).WaitAsync(RelayProxy.Bound);
            status = response.StatusCode;
            await using var body = await response.Content.ReadAsStreamAsync();
            await body.CopyToAsync(received).WaitAsync(RelayProxy.Bound);
            return (status, received.ToArray(), null);
        }
        catch (Exception ex) when (ex is HttpRequestException or IOException)
        {
            return (status, received.ToArray(), ex);
        }
    }
}
