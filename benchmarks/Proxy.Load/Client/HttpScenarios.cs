using System.Buffers;
using System.Diagnostics;
using System.Net;

namespace Proxy.Load.Client;

/// <summary>What http-get and http-post share: send, read the body to its end into a pooled buffer, check its length.</summary>
public abstract class HttpScenario(LoadOptions options) : HttpClientScenario(options)
{
    protected abstract HttpRequestMessage CreateRequest();

    public override async Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state)
    {
        var buffer = ArrayPool<byte>.Shared.Rent(64 * 1024);
        var stopping = state.Stopping;
        try
        {
            while (!stopping.IsCancellationRequested)
            {
                var start = Stopwatch.GetTimestamp();
                try
                {
                    using var request = CreateRequest();
                    using var response = await connection.SendAsync(request, stopping);
                    await using var body = await response.Content.ReadAsStreamAsync(stopping);
                    long bytes = 0;
                    for (int read; (read = await body.ReadAsync(buffer, stopping)) > 0;)
                    {
                        bytes += read;
                    }

                    if (response.StatusCode != HttpStatusCode.OK || bytes != Options.Size)
                    {
                        stats.BadResponse(state, $"HTTP {(int)response.StatusCode}, {bytes} body bytes (expected 200, {Options.Size})");
                        continue;
                    }

                    stats.Completed(state, start, bytes);
                }
                catch (Exception) when (IsStopping(state))
                {
                    return;
                }
                catch (Exception ex)
                {
                    stats.Failed(state, ex);
                }
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }
}

/// <summary>http-get: GET /size/{--size}.</summary>
public sealed class HttpGetScenario(LoadOptions options) : HttpScenario(options)
{
    private readonly Uri _uri = new(options.Url, $"/size/{options.Size}");

    protected override HttpRequestMessage CreateRequest() => ConnectionFactory.Request(HttpMethod.Get, _uri, Options.HttpVersion);
}

/// <summary>http-post: POST /echo with a --size body (the same array every time), echoed back.</summary>
public sealed class HttpPostScenario(LoadOptions options) : HttpScenario(options)
{
    private readonly Uri _uri = new(options.Url, "/echo");
    private readonly byte[] _body = CreateBody(options.Size);

    private static byte[] CreateBody(int size)
    {
        var body = new byte[size];
        body.AsSpan().Fill((byte)'p');
        return body;
    }

    protected override HttpRequestMessage CreateRequest()
    {
        var request = ConnectionFactory.Request(HttpMethod.Post, _uri, Options.HttpVersion);
        // ByteArrayContent wraps the array without copying it.
        request.Content = new ByteArrayContent(_body);
        request.Content.Headers.TryAddWithoutValidation("content-type", "application/octet-stream");
        return request;
    }
}
