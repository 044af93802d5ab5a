using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;

namespace Proxy.FunctionalTests.Cli;

/// <summary>nghttp (nghttp2's client; it does not verify certificates) over h2c prior knowledge and TLS.</summary>
public sealed class NghttpTests(HelloAppFixture fixture) : IClassFixture<HelloAppFixture>, IDisposable
{
    private static readonly TimeSpan s_timeout = TimeSpan.FromSeconds(30);
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-nghttp-").FullName;

    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Tls, HttpTransport.Http2Cleartext);

    [InteropTheory("nghttp")]
    [MemberData(nameof(Transports))]
    public async Task Get_Verbose_SeesSettingsHeadersAndData(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);

        var result = await ToolProcess.RunAsync(InteropTool.Nghttp, ["-v", host.AddressFor(transport).ToString()], s_timeout);

        Assert.True(result.ExitCode == 0, result.ToString());
        var output = result.StandardOutput;
        Assert.Contains("recv SETTINGS frame", output);
        // nghttp opens its request stream after a few PRIORITY-only streams, so its id is not 1.
        Assert.Matches(@"recv \(stream_id=\d+\) :status: 200", output);
        Assert.Contains("recv HEADERS frame <length=", output);
        Assert.Contains("recv DATA frame", output);
        Assert.Contains(HelloAppFixture.Greeting("HTTP/2"), output);
        // nghttp ends with a GOAWAY once it is done: the server must not have sent one with an error.
        Assert.DoesNotContain("error_code=PROTOCOL_ERROR", output);
    }

    [InteropTheory("nghttp")]
    [MemberData(nameof(Transports))]
    public async Task Post_DataFile_EchoedExactly(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        // Text so that stdout (which nghttp writes the body to) compares exactly; 300 KB spans several windows' worth of frames.
        var payload = string.Concat(Enumerable.Range(0, 30_000).Select(i => $"line {i:D5}\n"));
        var input = Path.Combine(_directory, "request.txt");
        await File.WriteAllTextAsync(input, payload);

        var result = await ToolProcess.RunAsync(
            InteropTool.Nghttp, ["-d", input, new Uri(host.AddressFor(transport), "/echo").ToString()], s_timeout);

        Assert.True(result.ExitCode == 0, result.ToString());
        Assert.Equal(payload.Length, result.StandardOutput.Length);
        Assert.Equal(payload, result.StandardOutput);
    }

    public void Dispose() => Directory.Delete(_directory, recursive: true);
}
