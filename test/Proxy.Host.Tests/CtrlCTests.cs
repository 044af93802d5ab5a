using System.Diagnostics;
using System.Net;
using System.Text;
using System.Text.RegularExpressions;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>Ctrl+C on the real proxy process: the first one drains and says so, a second one stops at once.</summary>
public sealed class CtrlCTests
{
    [Fact]
    public async Task SecondSigint_RequestStillOpen_ProcessStopsAtOnce()
    {
        if (!OperatingSystem.IsLinux() && !OperatingSystem.IsMacOS())
        {
            return; // signals are sent with kill(1)
        }

        // A shell without job control starts background commands with SIGINT ignored, and the proxy process inherits
        // that (execve keeps ignored signals): it could never see the Ctrl+C this test sends, so say so instead of hanging.
        Assert.False(ProxyProcess.InheritsIgnoredSigInt(),
            "This test process ignores SIGINT (started in the background by a shell without job control), so the proxy it starts would too: run it in the foreground or under `set -m`.");

        // A backend whose response never ends (and is not an event stream, so the first Ctrl+C waits for it).
        var builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [] });
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer();
        await using var backend = builder.Build();
        backend.MapGet("/slow", async (HttpContext context) =>
        {
            await context.Response.WriteAsync("started\n");
            await context.Response.Body.FlushAsync();
            await Task.Delay(Timeout.Infinite, context.RequestAborted).ContinueWith(_ => { });
        });
        await backend.StartAsync();
        var backendAddress = backend.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Single();

        using var folder = new TempFolder();
        var config = folder.Write("proxy.json", $$"""
            { "ReverseProxy": {
                "Routes": { "all": { "ClusterId": "b", "Match": { "Path": "/{**rest}" } } },
                "Clusters": { "b": { "Destinations": { "d1": { "Address": "{{backendAddress}}/" } } } } } }
            """);
        using var proxy = ProxyProcess.Start(Path.Combine(AppContext.BaseDirectory, "Proxy.Host.dll"), "--config", config, "--urls=http://127.0.0.1:0", "--Admin:Url=http://127.0.0.1:0");
        var listening = await proxy.WaitForLineAsync("Proxy listening on ");
        var address = Regex.Match(listening, @"http://127\.0\.0\.1:[0-9]+").Value;

        using var client = new HttpClient { Timeout = Timeout.InfiniteTimeSpan };
        using var response = await client.GetAsync(address + "/slow", HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync());
        Assert.Equal("started", await reader.ReadLineAsync()); // the request is open through the proxy

        proxy.Interrupt();
        var stopping = await proxy.WaitForLineAsync("Stopping: open requests get up to");
        proxy.Interrupt();
        var stopped = await proxy.WaitForLineAsync("Stopped at once");
        await proxy.Process.WaitForExitAsync();

        Assert.Contains("press Ctrl+C again to stop at once", stopping);
        Assert.Contains("open requests were aborted", stopped);
        Assert.Equal(0, proxy.Process.ExitCode);
        await Assert.ThrowsAnyAsync<Exception>(() => reader.ReadToEndAsync()); // aborted, not ended
        await backend.StopAsync();
    }
}
