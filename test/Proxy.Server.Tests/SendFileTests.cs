using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Server.Internal;

namespace Proxy.Server.Tests;

public sealed class SendFileTests : IDisposable
{
    private readonly string _path = Path.GetTempFileName();
    private readonly byte[] _content = new byte[300_000]; // several flushes' worth, not a multiple of any block

    public SendFileTests()
    {
        new Random(7).NextBytes(_content);
        File.WriteAllBytes(_path, _content);
    }

    public void Dispose() => File.Delete(_path);

    private static async Task RunAsync(FakeExchange exchange, RequestDelegate app)
    {
        var handler = new HttpApplicationHandler<HttpContext>(new DelegateApplication(app), new ProxyServerOptions(),
            new DateHeaderCache(TimeProvider.System), NullLogger.Instance);
        await handler.HandleAsync(exchange).WaitAsync(Patience.Long);
    }

    private static FakeExchange Exchange() => new() { Connection = FakeExchange.Plain() };

    [Fact]
    public async Task SendFileAsync_WholeFile_BodyIsTheFileAndResponseStartedFirst()
    {
        var exchange = Exchange();
        await RunAsync(exchange, context =>
        {
            context.Response.ContentLength = _content.Length;
            return context.Features.GetRequiredFeature<IHttpResponseBodyFeature>().SendFileAsync(_path, 0, null);
        });

        Assert.Equal(_content, await exchange.ReadResponseBodyAsync());
        Assert.Equal(1, exchange.StartCalls);
        Assert.False(exchange.BodyFlushedBeforeStart); // headers went to the exchange before any body byte
        Assert.Equal(_content.Length.ToString(System.Globalization.CultureInfo.InvariantCulture),
            exchange.HeadersAtStart!.First(h => h.Key == "Content-Length").Value);
    }

    [Fact]
    public async Task SendFileAsync_Range_OnlyThoseBytes()
    {
        var exchange = Exchange();
        await RunAsync(exchange, context =>
            context.Features.GetRequiredFeature<IHttpResponseBodyFeature>().SendFileAsync(_path, 70_001, 100_000));

        Assert.Equal(_content.AsSpan(70_001, 100_000).ToArray(), await exchange.ReadResponseBodyAsync());
    }

    [Fact]
    public async Task SendFileAsync_ThroughStaticFileExtension_SameBytes()
    {
        var exchange = Exchange();
        await RunAsync(exchange, context => context.Response.SendFileAsync(_path));

        Assert.Equal(_content, await exchange.ReadResponseBodyAsync());
    }

    [Theory]
    [InlineData(-1L, null)]
    [InlineData(300_001L, null)]
    [InlineData(0L, 300_001L)]
    [InlineData(10L, -1L)]
    public async Task SendFileAsync_OutsideTheFile_ThrowsBeforeStarting(long offset, long? count)
    {
        var exchange = Exchange();
        Exception? thrown = null;
        await RunAsync(exchange, async context =>
        {
            try
            {
                await context.Features.GetRequiredFeature<IHttpResponseBodyFeature>().SendFileAsync(_path, offset, count);
            }
            catch (ArgumentOutOfRangeException e)
            {
                thrown = e;
            }
        });

        Assert.NotNull(thrown);
        Assert.Empty(await exchange.ReadResponseBodyAsync());
    }

    [Fact]
    public async Task SendFileAsync_AfterTheBodyWasCompleted_ThrowsWithoutSending()
    {
        var exchange = Exchange();
        Exception? thrown = null;
        await RunAsync(exchange, async context =>
        {
            await context.Response.BodyWriter.WriteAsync(new byte[] { 1, 2, 3 });
            context.Response.BodyWriter.Complete();
            try
            {
                await context.Features.GetRequiredFeature<IHttpResponseBodyFeature>().SendFileAsync(_path, 0, null);
            }
            catch (InvalidOperationException e)
            {
                thrown = e;
            }
        });

        Assert.NotNull(thrown);
        Assert.Equal(new byte[] { 1, 2, 3 }, await exchange.ReadResponseBodyAsync());
    }

    [Fact]
    public async Task SendFileAsync_CanceledToken_ThrowsWithoutSending()
    {
        var exchange = Exchange();
        Exception? thrown = null;
        await RunAsync(exchange, async context =>
        {
            try
            {
                await context.Features.GetRequiredFeature<IHttpResponseBodyFeature>().SendFileAsync(_path, 0, null, new CancellationToken(canceled: true));
            }
            catch (OperationCanceledException e)
            {
                thrown = e;
            }
        });

        Assert.NotNull(thrown);
        Assert.Empty(await exchange.ReadResponseBodyAsync());
    }
}
