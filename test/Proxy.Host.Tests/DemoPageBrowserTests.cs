using Proxy.Testing.Interop;
using static Microsoft.Playwright.Assertions;

namespace Proxy.Host.Tests;

/// <summary>The bundled config's first page, loaded through the proxy in a real browser: the demo's events arrive live.</summary>
public sealed class DemoPageBrowserTests
{
    [InteropFact("chromium")]
    public async Task DemoPage_ThroughProxyOverH2_ShowsEventsLiveAndLinksTheDashboard()
    {
        await using var runner = await HostRunner.StartAsync("--Demo:SseInterval=00:00:00.100");
        await using var browser = await BrowserSession.StartAsync();
        var page = await browser.NewPageAsync();

        await page.GotoAsync(new Uri(runner.Https, "/").ToString());

        await Expect(page.Locator("#state")).ToHaveTextAsync("open");
        await Expect(page.Locator("#count")).ToHaveTextAsync(new System.Text.RegularExpressions.Regex("^(?:[3-9]|[1-9][0-9]+)$"));
        await Expect(page.Locator("#events li").First).ToContainTextAsync("\"id\":");
        await Expect(page.Locator("a#dashboard")).ToHaveAttributeAsync("href", runner.Admin.ToString());
        await BrowserSession.ScreenshotAsync(page, "demo-page.png");
    }
}
