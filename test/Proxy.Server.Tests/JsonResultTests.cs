using System.Net;
using System.Text.Json;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Proxy.Server.Tests;

/// <summary>
/// Results.Json on our server: System.Text.Json serializes into the response PipeWriter and requires it to report its
/// unflushed bytes (it threw on ours, so every JSON minimal API answered 500).
/// </summary>
public sealed class JsonResultTests
{
    [Theory]
    [InlineData("1.1", 3)]
    [InlineData("1.1", 200_000)] // past the serializer's flush threshold: it flushes midway
    [InlineData("2.0", 3)]
    [InlineData("2.0", 200_000)]
    public async Task ResultsJson_SmallAndLarge_WholeDocumentArrives(string version, int count)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.WebHost.UseProxyServer();
        await using var app = builder.Build();
        app.MapGet("/json", () => Results.Json(new { items = Enumerable.Range(0, count).ToArray() }));
        await app.StartAsync();
        var address = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.Single();
        using var client = new HttpClient
        {
            DefaultRequestVersion = Version.Parse(version),
            DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
        };

        using var response = await client.GetAsync(address + "/json");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal("application/json", response.Content.Headers.ContentType?.MediaType);
        using var document = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        var items = document.RootElement.GetProperty("items");
        Assert.Equal(count, items.GetArrayLength());
        Assert.Equal(count - 1, items[count - 1].GetInt32());
        await app.StopAsync();
    }
}
