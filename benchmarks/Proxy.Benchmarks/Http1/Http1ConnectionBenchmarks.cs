using BenchmarkDotNet.Attributes;
using Proxy.Protocols.Http1;

namespace Proxy.Benchmarks.Http1;

/// <summary>
/// The HTTP/1.1 engine end to end: an <see cref="Http1Connection"/> over in-memory pipes (default, thread-pool
/// schedulers) serving keep-alive <c>GET /size/100</c>, <see cref="Depth"/> requests per client write
/// (1 = h2load <c>--h1 -m1</c>, 16 = pipelined). <see cref="Stack"/> <c>Engine</c> answers with a handler on
/// the engine seam (<see cref="SmallBodyHandler"/>); <c>AspNetCore</c> runs a WebApplication with routing
/// through our server's glue (<see cref="AspNetCoreHost"/>). Times and allocations are per request;
/// allocations count every thread (the connection loop, the app, the client).
/// </summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
[OperationsPerSecond]
public class Http1ConnectionBenchmarks
{
    /// <summary>Divisible by every <see cref="Depth"/>: 256 round trips of 1, 16 of 16.</summary>
    private const int RequestsPerInvoke = 256;

    private AspNetCoreHost? _host;
    private Http1BenchClient _client = null!;

    public enum ServerStack
    {
        Engine,
        AspNetCore,
    }

    [Params(ServerStack.Engine, ServerStack.AspNetCore)]
    public ServerStack Stack { get; set; }

    /// <summary>Requests written back to back before the client waits for their responses.</summary>
    [Params(1, 16)]
    public int Depth { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        if (RequestsPerInvoke % Depth != 0)
        {
            throw new InvalidOperationException($"{RequestsPerInvoke} requests do not split into batches of {Depth}.");
        }
        if (Stack == ServerStack.AspNetCore)
        {
            _host = AspNetCoreHost.StartAsync().GetAwaiter().GetResult();
            _client = Http1BenchClient.Start(_host.ServeHttp1Async, SmallBodyHandler.Body.Length);
        }
        else
        {
            var handler = new SmallBodyHandler();
            _client = Http1BenchClient.Start(
                transport => new Http1Connection(transport, new Http1Options(), handler, new() { ConnectionId = "bench" }, TimeProvider.System)
                    .ProcessAsync(CancellationToken.None),
                SmallBodyHandler.Body.Length);
        }
        // One batch before measuring: it validates the responses.
        _client.RunBatchAsync(Depth).AsTask().GetAwaiter().GetResult();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _client.DisposeAsync().AsTask().GetAwaiter().GetResult();
        _host?.DisposeAsync().AsTask().GetAwaiter().GetResult();
    }

    [Benchmark(OperationsPerInvoke = RequestsPerInvoke)]
    public async Task KeepAliveGets()
    {
        for (int batch = RequestsPerInvoke / Depth; batch > 0; batch--)
        {
            await _client.RunBatchAsync(Depth);
        }
    }
}
