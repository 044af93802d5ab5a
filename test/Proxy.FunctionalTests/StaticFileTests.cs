using System.Net;
using System.Net.Http.Headers;
using System.Security.Cryptography;
using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.FileProviders;
using Proxy.FunctionalTests.Hosting;

namespace Proxy.FunctionalTests;

/// <summary>ASP.NET's static file middleware over a temporary directory: SendFileAsync with whole files and ranges.</summary>
// Owned by xUnit; the directory lives as long as the fixture.
public sealed class StaticFileAppFixture : HostFixture, IDisposable
{
    public string Directory { get; } = Path.Combine(Path.GetTempPath(), "proxy-static-" + Guid.NewGuid().ToString("N"));
    public byte[] Big { get; }

    public StaticFileAppFixture()
    {
        System.IO.Directory.CreateDirectory(Directory);
        Big = new byte[3 * 1024 * 1024 + 17]; // many frames, windows and output blocks; not a multiple of any
        new Random(5).NextBytes(Big);
        File.WriteAllBytes(Path.Combine(Directory, "big.bin"), Big);
    }

    protected override void MapEndpoints(WebApplication app)
        => app.UseStaticFiles(new StaticFileOptions { FileProvider = new PhysicalFileProvider(Directory), ServeUnknownFileTypes = true });

    public void Dispose() => System.IO.Directory.Delete(Directory, recursive: true);
}

public sealed class StaticFileTests(StaticFileAppFixture fixture) : IClassFixture<StaticFileAppFixture>
{
    public static TheoryData<ServerKind, HttpTransport> AllTransports => TestClients.AllTransports();

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Get_3MBFile_SameBytesOnEveryProtocol(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);

        using var response = await client.GetAsync("/big.bin");
        var body = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(transport.Version(), response.Version);
        Assert.Equal(fixture.Big.Length, response.Content.Headers.ContentLength);
        Assert.Equal(fixture.Big.Length, body.Length);
        Assert.Equal(Convert.ToHexString(SHA256.HashData(fixture.Big)), Convert.ToHexString(SHA256.HashData(body)));
    }

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Get_Range_206WithOnlyThoseBytes(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);
        using var request = new HttpRequestMessage(HttpMethod.Get, "/big.bin")
        {
            Version = client.DefaultRequestVersion,
            VersionPolicy = client.DefaultVersionPolicy,
        };
        request.Headers.Range = new RangeHeaderValue(100_001, 1_300_000);

        using var response = await client.SendAsync(request);
        var body = await response.Content.ReadAsByteArrayAsync();

        Assert.Equal(HttpStatusCode.PartialContent, response.StatusCode);
        Assert.Equal(transport.Version(), response.Version);
        Assert.Equal(fixture.Big.AsSpan(100_001, 1_200_000).ToArray(), body);
    }

    [Theory]
    [MemberData(nameof(AllTransports))]
    public async Task Get_ClientAbandonsDownloads_NextRequestsOnTheSameClientStillServed(ServerKind kind, HttpTransport transport)
    {
        var host = await fixture.GetAsync(kind);
        using var client = TestClients.Create(host, transport);

        // Read a little of each download, then drop it: HTTP/2 resets the stream mid-file, HTTP/1.1 closes the connection.
        for (var i = 0; i < 3; i++)
        {
            using var response = await client.GetAsync("/big.bin", HttpCompletionOption.ResponseHeadersRead);
            await using var stream = await response.Content.ReadAsStreamAsync();
            var some = new byte[1000];
            await stream.ReadExactlyAsync(some);
            Assert.Equal(fixture.Big.AsSpan(0, 1000).ToArray(), some);
        }
        var whole = await client.GetByteArrayAsync("/big.bin");

        Assert.Equal(fixture.Big.Length, whole.Length);
        Assert.Equal(Convert.ToHexString(SHA256.HashData(fixture.Big)), Convert.ToHexString(SHA256.HashData(whole)));
    }
}
