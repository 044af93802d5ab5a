using BenchmarkDotNet.Attributes;
using Proxy.Protocols.Http2;

namespace Proxy.Benchmarks.Http2;

/// <summary>
/// The engine end to end: an <see cref="Http2Connection"/> (read loop, stream dispatch to the thread pool,
/// frame-writer loop, HPACK both ways) over in-memory pipes, serving gRPC-unary-shaped requests from
/// <see cref="Concurrency"/> streams at a time. Times and allocations are per request; allocations count
/// every thread (the read loop, the writer loop and the handlers as well as the client).
/// </summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
[OperationsPerSecond]
public class Http2ConnectionBenchmarks
{
    /// <summary>Divisible by every <see cref="Concurrency"/> value: 280 sequential calls, 35 waves of 8, 4 waves of 70.</summary>
    private const int RequestsPerInvoke = 280;

    private Http2BenchClient _client = null!;

    /// <summary>Streams in flight at once: each wave opens this many streams and waits for all their responses.</summary>
    [Params(1, 8, 70)]
    public int Concurrency { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        if (RequestsPerInvoke % Concurrency != 0)
        {
            throw new InvalidOperationException($"{RequestsPerInvoke} requests do not split into waves of {Concurrency}.");
        }
        _client = Http2BenchClient.StartAsync(new GrpcUnaryHandler(), new Http2Options()).GetAwaiter().GetResult();
        // One wave before measuring: it carries the cold request block and validates the responses.
        _client.RunWaveAsync(Concurrency).AsTask().GetAwaiter().GetResult();
    }

    [GlobalCleanup]
    public void Cleanup() => _client.DisposeAsync().AsTask().GetAwaiter().GetResult();

    [Benchmark(OperationsPerInvoke = RequestsPerInvoke)]
    public async Task UnaryCalls()
    {
        for (int wave = RequestsPerInvoke / Concurrency; wave > 0; wave--)
        {
            await _client.RunWaveAsync(Concurrency);
        }
    }
}
