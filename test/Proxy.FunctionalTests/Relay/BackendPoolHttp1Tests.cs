using Microsoft.Extensions.Logging.Abstractions;
using Proxy.Protocols.Client;
using Proxy.Relay;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// A destination's HTTP/1.1 connections through the pool's accounting: every connection it opens is counted once and
/// closed once, whatever way a request on it fails, so MaxConnections holds.
/// </summary>
public sealed class BackendPoolHttp1Tests
{
    private const string Ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    [Fact]
    public async Task IdleConnectionBroken_NextRequestOpensAnother_CountedOnce()
    {
        await using var backend = new RawHttp1Backend(Ok);
        await using var pool = NewPool(backend);

        await CompleteAsync(pool, expectReused: false);
        var first = await backend.NextConnectionAsync();
        Assert.Equal(1, pool.ConnectionCount);

        // The idle connection's socket breaks while nobody uses it; the backend sees it go.
        Assert.Equal(1, pool.AbortIdleHttp1Transports());
        await first.ClosedByProxy.WaitAsync(RelayProxy.Bound);

        // The next request finds it idle, cannot write its head there, and opens a connection of its own.
        await CompleteAsync(pool, expectReused: false);
        Assert.Equal(2, backend.ConnectionCount);
        Assert.Equal(1, pool.ConnectionCount); // the broken one counted out once, the new one in once

        // At MaxConnections = 1 the request after it rides the same connection.
        await CompleteAsync(pool, expectReused: true, answered: false);
        Assert.Equal(2, backend.ConnectionCount);
    }

    [Fact]
    public async Task RequestThatCannotBeWritten_RefusedOnIdleConnection_ConnectionStaysInThePool()
    {
        await using var backend = new RawHttp1Backend(Ok);
        await using var pool = NewPool(backend);
        await CompleteAsync(pool, expectReused: false);

        var invalid = Request();
        invalid.Headers.Add(new("x-bad", "a\r\nInjected: yes"));
        await Assert.ThrowsAsync<ArgumentException>(async () => await pool.OpenAsync(invalid, CancellationToken.None));

        // The connection went back idle: the next request takes it instead of waiting forever for one to come back.
        Assert.Equal(1, pool.ConnectionCount);
        await CompleteAsync(pool, expectReused: true, answered: false);
        Assert.Equal(1, backend.ConnectionCount);
    }

    [Fact]
    public async Task RequestThatCannotBeWritten_RefusedOnNewConnection_ConnectionWaitsIdle()
    {
        await using var backend = new RawHttp1Backend(Ok);
        await using var pool = NewPool(backend);

        var invalid = Request();
        invalid.Headers.Add(new("x-bad", "a\nb"));
        await Assert.ThrowsAsync<ArgumentException>(async () => await pool.OpenAsync(invalid, CancellationToken.None));
        Assert.Equal(1, pool.ConnectionCount);

        await CompleteAsync(pool, expectReused: true);
        Assert.Equal(1, backend.ConnectionCount);
    }

    /// <summary>A pool for <paramref name="backend"/> of at most one connection: an uncounted one shows as a second.</summary>
    private static BackendPool NewPool(RawHttp1Backend backend) =>
        new(backend.Address.ToString(), new BackendPoolSettings { MaxConnections = 1 }, NullLogger.Instance, TimeProvider.System);

    private static BackendRequest Request() => new() { Method = "GET", Authority = "backend", PathAndQuery = "/" };

    /// <summary>
    /// Opens a GET; when <paramref name="answered"/> (the backend answers each connection's first request only), reads
    /// its response to the end; then gives the exchange back.
    /// </summary>
    private static async Task CompleteAsync(BackendPool pool, bool expectReused, bool answered = true)
    {
        var (exchange, reused) = await pool.OpenAsync(Request(), CancellationToken.None).AsTask().WaitAsync(RelayProxy.Bound);
        try
        {
            Assert.Equal(expectReused, reused);
            if (!answered)
            {
                exchange.Abort();
                return;
            }
            await exchange.ReadResponseHeadAsync(CancellationToken.None).AsTask().WaitAsync(RelayProxy.Bound);
            Assert.Equal(200, exchange.StatusCode);
            var body = "";
            while (true)
            {
                var read = await exchange.ResponseBody.ReadAsync().AsTask().WaitAsync(RelayProxy.Bound);
                body += System.Text.Encoding.ASCII.GetString(System.Buffers.BuffersExtensions.ToArray(read.Buffer));
                exchange.ResponseBody.AdvanceTo(read.Buffer.End);
                if (read.IsCompleted)
                {
                    break;
                }
            }
            Assert.Equal("ok", body);
        }
        finally
        {
            await exchange.DisposeAsync();
        }
    }
}
