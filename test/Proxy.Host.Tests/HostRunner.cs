using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>Starts the standalone proxy in-process with every port 0 and a throwaway certificate folder.</summary>
// Owned by the test that created it; disposing stops the proxy and the demo backends and deletes the folder.
public sealed class HostRunner : IAsyncDisposable
{
    private HostRunner(ProxyHostApp host, TempFolder folder)
    {
        Host = host;
        Folder = folder;
    }

    public ProxyHostApp Host { get; }

    public TempFolder Folder { get; }

    public Uri Https => Host.Addresses.Single(a => a.Scheme == Uri.UriSchemeHttps);

    public Uri Http => Host.Addresses.Single(a => a.Scheme == Uri.UriSchemeHttp);

    /// <summary>The admin endpoint's address (it is on by default).</summary>
    public Uri Admin => Host.Admin?.Address ?? throw new InvalidOperationException("The admin endpoint is off (Admin:Enabled=false).");

    /// <summary>Arguments that put the proxy and the demo backends on free ports.</summary>
    public static string[] PortZeroArguments(TempFolder folder) =>
    [
        "--urls=https://127.0.0.1:0;http://127.0.0.1:0",
        "--Demo:SseUrl=http://127.0.0.1:0",
        "--Admin:Url=http://127.0.0.1:0",
        "--Demo:GrpcUrl=http://127.0.0.1:0",
        $"--ProxyServer:DevelopmentCertificateDirectory={folder.Path}",
        "--Logging:LogLevel:Default=Warning",
    ];

    public static Task<HostRunner> StartAsync(params string[] extraArguments) => StartAsync(logs: null, extraArguments);

    /// <summary>Starts the proxy with <paramref name="logs"/> (when given) receiving every log message of the host.</summary>
    public static async Task<HostRunner> StartAsync(LogCapture? logs, params string[] extraArguments)
    {
        var folder = new TempFolder();
        try
        {
            var host = await ProxyHostApp.StartAsync([.. PortZeroArguments(folder), .. extraArguments],
                logs is null ? null : builder => builder.Logging.AddProvider(logs), CancellationToken.None);
            return new HostRunner(host, folder);
        }
        catch
        {
            folder.Dispose();
            throw;
        }
    }

    /// <summary>A client that speaks only HTTP/2 (h2 over TLS, h2c prior knowledge on http) and trusts the dev certificate.</summary>
    public static HttpClient Http2Client() => new(new SocketsHttpHandler
    {
        SslOptions = { RemoteCertificateValidationCallback = (_, _, _, _) => true },
    })
    {
        DefaultRequestVersion = System.Net.HttpVersion.Version20,
        DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
        Timeout = TimeSpan.FromSeconds(30),
    };

    public async ValueTask DisposeAsync()
    {
        try
        {
            await Host.DisposeAsync();
        }
        finally
        {
            Folder.Dispose();
        }
    }
}

/// <summary>A fresh folder under the system temp folder, deleted on dispose.</summary>
public sealed class TempFolder : IDisposable
{
    public TempFolder(string prefix = "proxy-host-tests")
    {
        Path = System.IO.Path.Combine(System.IO.Path.GetTempPath(), $"{prefix}-{Guid.NewGuid():N}");
        Directory.CreateDirectory(Path);
    }

    public string Path { get; }

    public string Write(string name, string contents)
    {
        var file = System.IO.Path.Combine(Path, name);
        File.WriteAllText(file, contents);
        return file;
    }

    public void Dispose()
    {
        try
        {
            Directory.Delete(Path, recursive: true);
        }
        catch (IOException)
        {
            // A child process may still hold a file for a moment; the OS cleans temp eventually.
        }
    }
}
