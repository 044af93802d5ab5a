using System.Text.RegularExpressions;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;

namespace Proxy.FunctionalTests.Cli;

/// <summary>An h2load smoke run: many multiplexed requests over a few connections, every one must succeed.</summary>
[Collection(SerialCollection.Name)]
public sealed partial class H2loadTests(HelloAppFixture fixture) : IClassFixture<HelloAppFixture>
{
    private const int Requests = 5000;

    public static TheoryData<ServerKind, HttpTransport> Transports =>
        TestClients.AllTransports(HttpTransport.Http2Tls, HttpTransport.Http2Cleartext);

    [InteropTheory("h2load")]
    [MemberData(nameof(Transports))]
    public async Task Get_5000RequestsOver4Connections_AllSucceed(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);

        var result = await ToolProcess.RunAsync(
            InteropTool.H2load,
            ["-n", Requests.ToString(), "-c", "4", "-m", "10", host.AddressFor(transport).ToString()],
            TimeSpan.FromSeconds(60));

        Assert.True(result.ExitCode == 0, result.ToString());
        var output = result.StandardOutput;
        Assert.Contains($"Application protocol: {(transport.IsTls() ? "h2" : "h2c")}", output);

        var requests = RequestsLine().Match(output);
        Assert.True(requests.Success, "no 'requests:' line in h2load's output\n" + result);
        Assert.Equal(Requests, int.Parse(requests.Groups["total"].Value));
        Assert.Equal(Requests, int.Parse(requests.Groups["started"].Value));
        Assert.Equal(Requests, int.Parse(requests.Groups["done"].Value));
        Assert.Equal(Requests, int.Parse(requests.Groups["succeeded"].Value));
        Assert.Equal(0, int.Parse(requests.Groups["failed"].Value));
        Assert.Equal(0, int.Parse(requests.Groups["errored"].Value));

        var status = StatusLine().Match(output);
        Assert.True(status.Success, "no 'status codes:' line in h2load's output\n" + result);
        Assert.Equal(Requests, int.Parse(status.Groups["ok"].Value));
    }

    [GeneratedRegex(@"requests: (?<total>\d+) total, (?<started>\d+) started, (?<done>\d+) done, (?<succeeded>\d+) succeeded, (?<failed>\d+) failed, (?<errored>\d+) errored")]
    private static partial Regex RequestsLine();

    [GeneratedRegex(@"status codes: (?<ok>\d+) 2xx")]
    private static partial Regex StatusLine();
}
