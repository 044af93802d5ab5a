using System.Buffers;
using System.IO.Pipelines;
using System.Net;
using System.Security.Authentication;
using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Protocols;
using Proxy.Server.Internal;

namespace Proxy.Server.Tests;

public class FeatureMappingTests
{
    private static async Task<DelegateApplication> RunAsync(FakeExchange exchange, RequestDelegate app, ProxyServerOptions? options = null)
    {
        var application = new DelegateApplication(app);
        var handler = new HttpApplicationHandler<HttpContext>(application, options ?? new ProxyServerOptions(),
            new DateHeaderCache(TimeProvider.System), NullLogger.Instance);
        await handler.HandleAsync(exchange).WaitAsync(Patience.Long);
        return application;
    }

    private static FakeExchange Exchange(string method = "GET", string target = "/", string protocol = "HTTP/1.1",
        string authority = "", bool hasBody = false, long? contentLength = null, ConnectionMetadata? connection = null)
        => new(method, target, protocol, "http", authority, hasBody, contentLength) { Connection = connection ?? FakeExchange.Plain() };

    private static string? Header(FakeExchange exchange, string name)
        => exchange.HeadersAtStart!.FirstOrDefault(h => h.Key == name).Value;

    [Fact]
    public async Task HandleAsync_Request_PathDecodedQueryRawHeadersCombined()
    {
        var exchange = Exchange("PUT", "/a%20b/./c/../d%2Fe?x=1%202&y");
        exchange.AddRequestHeader("Accept", "text/plain");
        exchange.AddRequestHeader("Accept", "text/html");
        exchange.AddRequestHeader("Host", "example.com:8080");
        HttpRequest? seen = null;
        string[]? accept = null;

        await RunAsync(exchange, context =>
        {
            seen = context.Request;
            accept = context.Request.Headers.Accept.ToArray()!;
            return Task.CompletedTask;
        });

        Assert.Equal("PUT", seen!.Method);
        Assert.Equal("HTTP/1.1", seen.Protocol);
        Assert.Equal("http", seen.Scheme);
        Assert.Equal("", seen.PathBase.Value);
        Assert.Equal("/a b/d%2Fe", seen.Path.Value);
        Assert.Equal("?x=1%202&y", seen.QueryString.Value);
        Assert.Equal("example.com:8080", seen.Host.Value);
        Assert.Equal(["text/plain", "text/html"], accept!);
        Assert.Equal("/a%20b/./c/../d%2Fe?x=1%202&y", seen.HttpContext.Features.Get<IHttpRequestFeature>()!.RawTarget);
    }

    [Fact]
    public async Task HandleAsync_Http2_AuthorityBecomesHostAndCookieCrumbsJoined()
    {
        var exchange = Exchange(protocol: "HTTP/2", authority: "example.org");
        exchange.AddRequestHeader("cookie", "a=1");
        exchange.AddRequestHeader("cookie", "b=2");
        string? host = null, cookie = null;

        await RunAsync(exchange, context =>
        {
            host = context.Request.Host.Value;
            cookie = context.Request.Headers.Cookie;
            return Task.CompletedTask;
        });

        Assert.Equal("example.org", host);
        Assert.Equal("a=1; b=2", cookie); // RFC 9113 §8.2.3
    }

    [Fact]
    public async Task HandleAsync_WriteBody_OnStartingRunsBeforeHeadersReachExchange()
    {
        var exchange = Exchange();
        var services = new ServiceCollection().BuildServiceProvider();
        var pipeline = new ApplicationBuilder(services);
        pipeline.Use(async (context, next) =>
        {
            context.Response.OnStarting(() =>
            {
                context.Response.Headers["X-Started"] = "yes";
                return Task.CompletedTask;
            });
            await next(context);
        });
        pipeline.Run(async context =>
        {
            context.Response.StatusCode = 201;
            context.Response.Headers["X-App"] = "1";
            await context.Response.WriteAsync("hello");
            await context.Response.Body.FlushAsync();
            Assert.True(context.Response.HasStarted);
            await context.Response.WriteAsync(" world");
        });

        await RunAsync(exchange, pipeline.Build());

        Assert.False(exchange.BodyFlushedBeforeStart);
        Assert.Equal(201, exchange.StatusAtStart);
        Assert.Equal("yes", Header(exchange, "X-Started"));
        Assert.Equal("1", Header(exchange, "X-App"));
        Assert.NotNull(Header(exchange, "Date"));
        Assert.Equal("proxy", Header(exchange, "Server"));
        Assert.Equal(1, exchange.CompleteCalls);
        Assert.Equal("hello world", Encoding.UTF8.GetString(await exchange.ReadResponseBodyAsync()));
    }

    [Fact]
    public async Task HandleAsync_Http2_HeaderNamesLowercaseAndConnectionFieldsDropped()
    {
        var exchange = Exchange(protocol: "HTTP/2");
        await RunAsync(exchange, context =>
        {
            context.Response.Headers["X-Mixed-Case"] = "v";
            context.Response.Headers.Connection = "close";
            context.Response.Headers["Transfer-Encoding"] = "chunked";
            return Task.CompletedTask;
        });

        Assert.Equal("v", Header(exchange, "x-mixed-case"));
        Assert.NotNull(Header(exchange, "date"));
        Assert.All(exchange.HeadersAtStart!, h => Assert.Equal(h.Key.ToLowerInvariant(), h.Key));
        Assert.DoesNotContain(exchange.HeadersAtStart!, h => h.Key is "connection" or "transfer-encoding");
    }

    [Fact]
    public async Task HandleAsync_BodyWrittenWithoutFlush_ContentLengthAnnounced()
    {
        var exchange = Exchange();
        // Written, never flushed (Response.WriteAsync would start the response first).
        await RunAsync(exchange, context =>
        {
            context.Response.BodyWriter.Write("12345"u8);
            return Task.CompletedTask;
        });
        Assert.Equal("5", Header(exchange, "Content-Length"));
        Assert.Equal("12345", Encoding.UTF8.GetString(await exchange.ReadResponseBodyAsync()));
    }

    [Fact]
    public async Task HandleAsync_NoServerHeaderOption_ServerHeaderOmitted()
    {
        var exchange = Exchange();
        await RunAsync(exchange, _ => Task.CompletedTask, new ProxyServerOptions { AddServerHeader = false });
        Assert.Null(Header(exchange, "Server"));
        Assert.Equal(200, exchange.StatusAtStart);
    }

    [Fact]
    public async Task HandleAsync_ThrowsBeforeStart_Empty500AndDisposeSeesException()
    {
        var exchange = Exchange();
        var application = await RunAsync(exchange, context =>
        {
            context.Response.Headers["X-Lost"] = "1";
            context.Response.BodyWriter.Write("partial"u8); // Buffered, not started: replaced by the 500.
            throw new InvalidOperationException("boom");
        });

        Assert.Equal(500, exchange.StatusAtStart);
        Assert.Null(Header(exchange, "X-Lost"));
        Assert.Equal("0", Header(exchange, "Content-Length"));
        Assert.Empty(await exchange.ReadResponseBodyAsync());
        Assert.Null(exchange.AbortCode);
        Assert.IsType<InvalidOperationException>(application.DisposedWith);
    }

    [Fact]
    public async Task HandleAsync_ThrowsAfterStart_AbortsWithInternalError()
    {
        var exchange = Exchange(protocol: "HTTP/2");
        await RunAsync(exchange, async context =>
        {
            await context.Response.WriteAsync("partial");
            await context.Response.Body.FlushAsync();
            throw new InvalidOperationException("boom");
        });

        Assert.Equal(200, exchange.StatusAtStart);
        Assert.Equal(0x2u, exchange.AbortCode); // RFC 9113 §7 INTERNAL_ERROR
    }

    [Fact]
    public async Task HandleAsync_ResponseTrailers_CopiedForHttp2()
    {
        var exchange = Exchange(protocol: "HTTP/2");
        await RunAsync(exchange, async context =>
        {
            Assert.True(context.Response.SupportsTrailers());
            await context.Response.WriteAsync("x");
            context.Response.AppendTrailer("Grpc-Status", "0");
        });
        Assert.Contains(new KeyValuePair<string, string>("grpc-status", "0"), exchange.ResponseTrailers);
    }

    [Fact]
    public async Task HandleAsync_ResetFeature_OnlyOnHttp2_AbortsWithGivenCode()
    {
        var h1 = Exchange();
        IHttpResetFeature? h1Reset = null;
        await RunAsync(h1, context =>
        {
            h1Reset = context.Features.Get<IHttpResetFeature>();
            return Task.CompletedTask;
        });
        Assert.Null(h1Reset);

        var h2 = Exchange(protocol: "HTTP/2");
        await RunAsync(h2, context =>
        {
            context.Features.Get<IHttpResetFeature>()!.Reset(0x8); // CANCEL
            return Task.CompletedTask;
        });
        Assert.Equal(0x8u, h2.AbortCode);
    }

    [Fact]
    public async Task HandleAsync_RequestAbortedAndAbort_MapToExchange()
    {
        var exchange = Exchange();
        var wasCanceled = true;
        await RunAsync(exchange, context =>
        {
            wasCanceled = context.RequestAborted.IsCancellationRequested;
            context.Abort();
            Assert.True(context.RequestAborted.IsCancellationRequested);
            return Task.CompletedTask;
        });
        Assert.False(wasCanceled);
        Assert.Equal(0x2u, exchange.AbortCode);
    }

    [Fact]
    public async Task HandleAsync_Echo_RequestBodyStreamsToResponse()
    {
        var exchange = Exchange("POST", "/echo", hasBody: true, contentLength: 11);
        await exchange.RequestBodyWriter.WriteAsync("hello body!"u8.ToArray());
        await exchange.RequestBodyWriter.CompleteAsync();
        bool? canHaveBody = null;

        await RunAsync(exchange, async context =>
        {
            canHaveBody = context.Features.Get<IHttpRequestBodyDetectionFeature>()!.CanHaveBody;
            await context.Request.BodyReader.CopyToAsync(context.Response.BodyWriter);
        });

        Assert.True(canHaveBody);
        Assert.Equal("hello body!", Encoding.UTF8.GetString(await exchange.ReadResponseBodyAsync()));
    }

    [Fact]
    public async Task HandleAsync_DeclaredBodyOverLimit_413()
    {
        var exchange = Exchange("POST", "/", hasBody: true, contentLength: 100);
        await exchange.RequestBodyWriter.WriteAsync(new byte[100]);
        await exchange.RequestBodyWriter.CompleteAsync();

        await RunAsync(exchange, async context =>
        {
            context.Features.Get<IHttpMaxRequestBodySizeFeature>()!.MaxRequestBodySize = 10;
            await context.Request.BodyReader.ReadAsync();
        });

        Assert.Equal(413, exchange.StatusAtStart);
    }

    [Fact]
    public async Task HandleAsync_BodyAlreadyHere_ReadCompletesAtOnce_AndAnOverLimitReadFaultsItsTaskInsteadOfThrowing()
    {
        var exchange = Exchange("POST", "/", hasBody: true, contentLength: 100);
        await exchange.RequestBodyWriter.WriteAsync(new byte[100]);
        await exchange.RequestBodyWriter.CompleteAsync();
        var completedAtOnce = false;
        long length = -1;
        var faultedNotThrown = false;

        await RunAsync(exchange, async context =>
        {
            var reader = context.Request.BodyReader;
            var read = reader.ReadAsync();
            completedAtOnce = read.IsCompletedSuccessfully;
            var result = await read;
            length = result.Buffer.Length;
            reader.AdvanceTo(result.Buffer.End);
        });

        var limited = Exchange("POST", "/", hasBody: true, contentLength: 100);
        await limited.RequestBodyWriter.WriteAsync(new byte[100]);
        await limited.RequestBodyWriter.CompleteAsync();
        await RunAsync(limited, async context =>
        {
            context.Features.Get<IHttpMaxRequestBodySizeFeature>()!.MaxRequestBodySize = 10;
            var read = context.Request.BodyReader.ReadAsync(); // must not throw here: the 413 is in the task
            faultedNotThrown = read.IsFaulted;
            await read;
        });

        Assert.True(completedAtOnce);
        Assert.Equal(100, length);
        Assert.True(faultedNotThrown);
        Assert.Equal(413, limited.StatusAtStart);
    }

    [Fact]
    public async Task HandleAsync_StreamedBodyOverLimit_413AndLimitReadOnlyAfterRead()
    {
        var exchange = Exchange("POST", "/", hasBody: true); // No content-length: counted as it arrives.
        await exchange.RequestBodyWriter.WriteAsync(new byte[50]);
        await exchange.RequestBodyWriter.CompleteAsync();
        var readOnly = false;

        await RunAsync(exchange, async context =>
        {
            var limit = context.Features.Get<IHttpMaxRequestBodySizeFeature>()!;
            limit.MaxRequestBodySize = 20;
            try
            {
                await context.Request.BodyReader.ReadAsync();
            }
            finally
            {
                readOnly = limit.IsReadOnly;
            }
        });

        Assert.True(readOnly);
        Assert.Equal(413, exchange.StatusAtStart);
    }

    [Fact]
    public async Task HandleAsync_RequestTrailers_AvailableOnlyAfterBodyEnds()
    {
        var exchange = Exchange("POST", "/", protocol: "HTTP/2", hasBody: true);
        exchange.RequestTrailers.Add("grpc-timeout", "1S");
        await exchange.RequestBodyWriter.WriteAsync(new byte[3]);
        await exchange.RequestBodyWriter.CompleteAsync();
        bool before = true, after = false;
        string? trailer = null;

        await RunAsync(exchange, async context =>
        {
            var feature = context.Features.Get<IHttpRequestTrailersFeature>()!;
            before = feature.Available;
            while (true)
            {
                var result = await context.Request.BodyReader.ReadAsync();
                context.Request.BodyReader.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
            after = feature.Available;
            trailer = context.Request.GetTrailer("grpc-timeout");
        });

        Assert.False(before);
        Assert.True(after);
        Assert.Equal("1S", trailer);
    }

    [Fact]
    public async Task HandleAsync_OnCompleted_RunsAfterResponseCompleted()
    {
        var exchange = Exchange();
        var completeCallsSeen = -1;
        await RunAsync(exchange, context =>
        {
            context.Response.OnCompleted(() =>
            {
                completeCallsSeen = exchange.CompleteCalls;
                return Task.CompletedTask;
            });
            return Task.CompletedTask;
        });
        Assert.Equal(1, completeCallsSeen);
    }

    [Fact]
    public async Task HandleAsync_BodyWrittenAndCompleted_HeadGoesWithTheCompletionNotBeforeIt()
    {
        var exchange = Exchange();
        await RunAsync(exchange, context =>
        {
            context.Response.Headers["X-App"] = "1";
            var span = context.Response.BodyWriter.GetSpan(5);
            "hello"u8.CopyTo(span);
            context.Response.BodyWriter.Advance(5);
            return Task.CompletedTask;
        });

        // The response was finished in one go: the exchange is never asked to send the head on its own (a second
        // socket write for HTTP/1.1, a second wake of the writer loop for HTTP/2); the completion carries it.
        Assert.Equal(0, exchange.StartCalls);
        Assert.Equal(1, exchange.CompleteCalls);
        Assert.False(exchange.BodyFlushedBeforeStart);
        Assert.Equal("1", Header(exchange, "X-App"));
        Assert.Equal("5", Header(exchange, "Content-Length"));
        Assert.Equal("hello"u8.ToArray(), await exchange.ReadResponseBodyAsync());
    }

    [Fact]
    public async Task HandleAsync_StatusAfterStart_Throws()
    {
        var exchange = Exchange();
        Exception? error = null;
        await RunAsync(exchange, async context =>
        {
            await context.Response.StartAsync();
            error = Record.Exception(() => context.Response.StatusCode = 404);
            Assert.True(context.Response.Headers.IsReadOnly);
        });
        Assert.IsType<InvalidOperationException>(error);
        Assert.Equal(1, exchange.StartCalls);
    }

    [Fact]
    public async Task HandleAsync_ConnectionAndTlsFeatures_FromMetadata()
    {
        var tlsConnection = new ConnectionMetadata
        {
            ConnectionId = "tls1",
            LocalEndPoint = new IPEndPoint(IPAddress.Loopback, 5001),
            RemoteEndPoint = new IPEndPoint(IPAddress.Parse("192.0.2.7"), 51000),
            IsTls = true,
            TlsProtocol = SslProtocols.Tls13,
            ApplicationProtocol = "h2",
            HostName = "example.com",
        };
        var exchange = new FakeExchange(protocol: "HTTP/2", scheme: "https") { Connection = tlsConnection };
        IHttpConnectionFeature? connection = null;
        ITlsHandshakeFeature? handshake = null;
        bool? isHttps = null;
        bool? upgradable = null;

        await RunAsync(exchange, context =>
        {
            connection = context.Features.Get<IHttpConnectionFeature>();
            handshake = context.Features.Get<ITlsHandshakeFeature>();
            isHttps = context.Request.IsHttps;
            upgradable = context.Features.Get<IHttpUpgradeFeature>()!.IsUpgradableRequest;
            return Task.CompletedTask;
        });

        Assert.Equal("tls1", connection!.ConnectionId);
        Assert.Equal(IPAddress.Parse("192.0.2.7"), connection.RemoteIpAddress);
        Assert.Equal(51000, connection.RemotePort);
        Assert.Equal(5001, connection.LocalPort);
        Assert.Equal(SslProtocols.Tls13, handshake!.Protocol);
        Assert.Equal("example.com", handshake.HostName);
        Assert.True(isHttps);
        Assert.False(upgradable);
    }

    [Fact]
    public async Task HandleAsync_PlainConnection_NoTlsFeatures()
    {
        var exchange = Exchange();
        object? tls = new();
        await RunAsync(exchange, context =>
        {
            tls = context.Features.Get<ITlsConnectionFeature>();
            return Task.CompletedTask;
        });
        Assert.Null(tls);
    }
}
