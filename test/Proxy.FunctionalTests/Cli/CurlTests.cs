using System.Security.Cryptography;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;

namespace Proxy.FunctionalTests.Cli;

public sealed class CurlTests(HelloAppFixture fixture) : IClassFixture<HelloAppFixture>, IDisposable
{
    private static readonly TimeSpan s_timeout = TimeSpan.FromSeconds(30);
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-curl-").FullName;

    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Tls, HttpTransport.Http2Cleartext, HttpTransport.Http11Cleartext, HttpTransport.Http11Tls);

    /// <summary>curl's flags for each transport and the %{http_version} it must report.</summary>
    private static (string[] Flags, string Version) CurlProtocol(HttpTransport transport) => transport switch
    {
        HttpTransport.Http2Tls => (["--http2", "-k"], "2"),
        HttpTransport.Http2Cleartext => (["--http2-prior-knowledge"], "2"),
        HttpTransport.Http11Cleartext => (["--http1.1"], "1.1"),
        HttpTransport.Http11Tls => (["--http1.1", "-k"], "1.1"),
        _ => throw new ArgumentOutOfRangeException(nameof(transport)),
    };

    [InteropTheory("curl")]
    [MemberData(nameof(Transports))]
    public async Task Get_NegotiatesExpectedVersion_ReturnsGreeting(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        var (flags, version) = CurlProtocol(transport);

        var result = await ToolProcess.RunAsync(
            InteropTool.Curl,
            [.. flags, "-sS", "--fail", "-w", "\n%{http_version} %{http_code}", host.AddressFor(transport).ToString()],
            s_timeout);

        Assert.True(result.ExitCode == 0, result.ToString());
        Assert.Equal($"{HelloAppFixture.Greeting(transport.RequestProtocol())}\n{version} 200", result.StandardOutput.TrimEnd('\n'));
    }

    [InteropTheory("curl")]
    [MemberData(nameof(Transports))]
    public async Task Post_OneMegabyteFile_EchoedByteForByte(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        var (flags, version) = CurlProtocol(transport);
        var payload = RandomNumberGenerator.GetBytes(1024 * 1024 + 7);
        var input = Path.Combine(_directory, "request.bin");
        var output = Path.Combine(_directory, "response.bin");
        await File.WriteAllBytesAsync(input, payload);

        var result = await ToolProcess.RunAsync(
            InteropTool.Curl,
            [.. flags, "-sS", "--fail", "--data-binary", "@" + input, "-H", "Content-Type: application/octet-stream",
             "-o", output, "-w", "%{http_version} %{http_code}", new Uri(host.AddressFor(transport), "/echo").ToString()],
            s_timeout);

        Assert.True(result.ExitCode == 0, result.ToString());
        Assert.Equal($"{version} 200", result.StandardOutput.Trim());
        Assert.Equal(Convert.ToHexString(SHA256.HashData(payload)), Convert.ToHexString(SHA256.HashData(await File.ReadAllBytesAsync(output))));
    }

    public void Dispose() => Directory.Delete(_directory, recursive: true);
}
