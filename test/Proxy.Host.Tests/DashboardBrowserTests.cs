using System.Net;
using System.Text.RegularExpressions;
using Microsoft.Playwright;
using Proxy.Testing.Interop;
using static Microsoft.Playwright.Assertions;

namespace Proxy.Host.Tests;

/// <summary>The admin dashboard in a real browser: the numbers move as traffic goes through the proxy.</summary>
public sealed partial class DashboardBrowserTests
{
    /// <summary>Set to 1 to refresh docs/dashboard.png (the README's picture) from this test's screenshot.</summary>
    private const string UpdateDocsVariable = "UPDATE_DASHBOARD_SCREENSHOT";

    [InteropFact("chromium")]
    public async Task Dashboard_UnderProxiedTraffic_ShowsRequestsLatencyAndOpenStream()
    {
        await using var runner = await HostRunner.StartAsync("--Demo:SseInterval=00:00:00.200");
        await using var browser = await BrowserSession.StartAsync();
        var page = await browser.NewPageAsync();
        await page.GotoAsync(runner.Admin.ToString());
        await Expect(page.Locator("#status")).ToHaveTextAsync("live");
        await Expect(page.Locator("#requests-total")).ToHaveTextAsync("0");

        // Traffic: requests over h2 (TLS) and HTTP/1.1, and an event stream that stays open.
        using var client = HostRunner.Http2Client();
        using var http1 = new HttpClient();
        for (var i = 0; i < 5; i++)
        {
            using var h2 = await client.GetAsync(new Uri(runner.Https, "/"));
            Assert.Equal(HttpStatusCode.OK, h2.StatusCode);
            using var h1 = await http1.GetAsync(new Uri(runner.Http, "/"));
            Assert.Equal(HttpStatusCode.OK, h1.StatusCode);
        }

        using var events = await client.GetAsync(new Uri(runner.Https, "/events"), HttpCompletionOption.ResponseHeadersRead);
        // The reader stays open to the end of the test: disposing it would close the stream through the proxy.
        using var stream = new StreamReader(await events.Content.ReadAsStreamAsync());
        Assert.Equal("id: 1", await FirstEventIdLineAsync(stream));

        await Expect(page.Locator("#requests-total")).ToHaveTextAsync(AtLeast(10));
        await Expect(page.Locator("#active-requests")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("#p50")).ToHaveTextAsync(Milliseconds());
        await Expect(page.Locator("#p99")).ToHaveTextAsync(Milliseconds());
        await Expect(page.Locator("tr[data-cluster='demo-sse'] td").Nth(3)).ToHaveTextAsync(AtLeast(1)); // the open stream
        // Our server's meter (Proxy.Server) and the forwarder's SSE gauge, read by name.
        await Expect(page.Locator("#sse")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("tr[data-cluster='demo-sse'] td").Nth(6)).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("#connections")).ToHaveTextAsync(AtLeast(2)); // the h2 client's and the HTTP/1.1 client's
        await Expect(page.Locator("#streams")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("#conn-h2")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("#conn-h1")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("#conn-tls")).ToHaveTextAsync(AtLeast(1));
        await Expect(page.Locator("tr[data-destination='demo-sse/sse'] .health")).ToHaveTextAsync(new Regex("^(Healthy|Unknown)$"));
        // The chart: at least three seconds of history drawn (one point a second).
        await Expect(page.Locator("#line-requests")).ToHaveAttributeAsync("points", new Regex(@"^(?:\S+,\S+ ){2,}\S+,\S+$"));

        var screenshot = await BrowserSession.ScreenshotAsync(page, "dashboard.png");
        Assert.True(new FileInfo(screenshot).Length > 0);
        if (Environment.GetEnvironmentVariable(UpdateDocsVariable) == "1")
        {
            File.Copy(screenshot, Path.Combine(RepositoryRoot(), "docs", "dashboard.png"), overwrite: true);
        }
    }

    /// <summary>A whole number of at least <paramref name="minimum"/> (as the page prints it, with thousands separators).</summary>
    private static Regex AtLeast(int minimum) => minimum switch
    {
        >= 1 and <= 9 => new($"^(?:[{minimum}-9]|[1-9][0-9,]+)$"),
        10 => new("^[1-9][0-9,]+$"),
        _ => throw new ArgumentOutOfRangeException(nameof(minimum)),
    };

    private static async Task<string?> FirstEventIdLineAsync(StreamReader reader)
    {
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        while (await reader.ReadLineAsync(timeout.Token) is { } line)
        {
            if (line.StartsWith("id: ", StringComparison.Ordinal))
            {
                return line;
            }
        }

        return null;
    }

    [GeneratedRegex(@"^[0-9.]+ ms$")]
    private static partial Regex Milliseconds();

    private static string RepositoryRoot()
    {
        for (var folder = new DirectoryInfo(AppContext.BaseDirectory); folder is not null; folder = folder.Parent)
        {
            if (File.Exists(Path.Combine(folder.FullName, "Proxy.sln")))
            {
                return folder.FullName;
            }
        }

        throw new InvalidOperationException("Proxy.sln not found above the test output folder.");
    }
}
