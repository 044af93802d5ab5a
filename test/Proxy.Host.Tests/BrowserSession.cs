using Microsoft.Playwright;
using Proxy.Testing.Interop;

namespace Proxy.Host.Tests;

/// <summary>
/// Debian's chromium driven by Playwright (its driver ships in the NuGet package; its own browser download is never
/// used). Tests that use it are <c>[InteropFact("chromium")]</c>: skipped with an install hint on a machine without
/// chromium, failed under CI.
/// </summary>
// Owned by one test; disposing closes the browser and the driver.
public sealed class BrowserSession : IAsyncDisposable
{
    /// <summary>Auto-waiting expectations get this long: generous for a busy 2-core machine, never a sleep.</summary>
    public const float ExpectTimeoutMs = 30_000;

    private readonly IPlaywright _playwright;

    private BrowserSession(IPlaywright playwright, IBrowser browser)
    {
        _playwright = playwright;
        Browser = browser;
    }

    public IBrowser Browser { get; }

    public static async Task<BrowserSession> StartAsync()
    {
        Assertions.SetDefaultExpectTimeout(ExpectTimeoutMs);
        var playwright = await Playwright.CreateAsync();
        try
        {
            var browser = await playwright.Chromium.LaunchAsync(new BrowserTypeLaunchOptions
            {
                ExecutablePath = InteropTool.Chromium.Require(),
                Headless = true,
                // Root in containers and CI: chromium's sandbox needs user namespaces it may not have.
                Args = ["--no-sandbox"],
            });
            return new BrowserSession(playwright, browser);
        }
        catch
        {
            playwright.Dispose();
            throw;
        }
    }

    public Task<IPage> NewPageAsync() => Browser.NewPageAsync(new BrowserNewPageOptions
    {
        ViewportSize = new ViewportSize { Width = 1280, Height = 860 },
        IgnoreHTTPSErrors = true, // the proxy's development certificate
    });

    /// <summary>Saves a screenshot in the test output folder (artifacts/NAME) and returns its path.</summary>
    public static async Task<string> ScreenshotAsync(IPage page, string name)
    {
        var folder = Path.Combine(AppContext.BaseDirectory, "artifacts");
        Directory.CreateDirectory(folder);
        var path = Path.Combine(folder, name);
        await page.ScreenshotAsync(new PageScreenshotOptions { Path = path, FullPage = true });
        return path;
    }

    public async ValueTask DisposeAsync()
    {
        await Browser.DisposeAsync();
        _playwright.Dispose();
    }
}
