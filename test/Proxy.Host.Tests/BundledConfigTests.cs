using System.Net;
using Grpc.Core;
using Grpc.Net.Client;
using Proxy.Demo.Grpc.Echo;

namespace Proxy.Host.Tests;

/// <summary>
/// What a newcomer gets from `dotnet run --project src/Proxy.Host`: the bundled proxy.json routes to the demo
/// backends the same process starts (here on free ports).
/// </summary>
public sealed class BundledConfigTests
{
    [Fact]
    public async Task Events_OverH2Tls_StreamsDemoEventsThroughProxy()
    {
        await using var runner = await HostRunner.StartAsync("--Demo:SseInterval=00:00:00.050");
        Assert.NotNull(runner.Host.Demo);
        Assert.EndsWith("proxy.json", runner.Host.ConfigFile);
        using var client = HostRunner.Http2Client();

        using var response = await client.GetAsync(new Uri(runner.Https, "/events"), HttpCompletionOption.ResponseHeadersRead);

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(HttpVersion.Version20, response.Version);
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType?.MediaType);
        Assert.Equal([1, 2, 3], await ReadEventIdsAsync(response, count: 3));
    }

    [Fact]
    public async Task Events_WithLastEventId_ResumesAfterItThroughProxy()
    {
        await using var runner = await HostRunner.StartAsync("--Demo:SseInterval=00:00:00.050");
        using var client = HostRunner.Http2Client();
        using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(runner.Http, "/events"));
        request.Headers.Add("Last-Event-ID", "41");

        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead);

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal([42, 43], await ReadEventIdsAsync(response, count: 2));
    }

    [Theory]
    [InlineData("https")]
    [InlineData("http")]
    public async Task GrpcUnary_ThroughProxy_EchoReplyAndOkStatus(string scheme)
    {
        await using var runner = await HostRunner.StartAsync();
        using var channel = GrpcChannel.ForAddress(scheme == "https" ? runner.Https : runner.Http, new GrpcChannelOptions
        {
            HttpHandler = new SocketsHttpHandler { SslOptions = { RemoteCertificateValidationCallback = (_, _, _, _) => true } },
            DisposeHttpClient = true,
        });

        using var call = new Echo.EchoClient(channel).UnaryAsync(new EchoRequest { Message = "hi", Sequence = 7 },
            deadline: DateTime.UtcNow.AddSeconds(30));
        var reply = await call.ResponseAsync;

        Assert.Equal("echo: hi", reply.Message);
        Assert.Equal(7, reply.Sequence);
        Assert.Equal(StatusCode.OK, call.GetStatus().StatusCode);
    }

    /// <summary>Reads the ids of the first <paramref name="count"/> events (the `id:` lines).</summary>
    internal static async Task<List<int>> ReadEventIdsAsync(HttpResponseMessage response, int count)
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync(timeout.Token));
        var ids = new List<int>();
        while (ids.Count < count && await reader.ReadLineAsync(timeout.Token) is { } line)
        {
            if (line.StartsWith("id: ", StringComparison.Ordinal))
            {
                ids.Add(int.Parse(line.AsSpan(4), System.Globalization.CultureInfo.InvariantCulture));
            }
        }

        return ids;
    }
}
