using System.Diagnostics.Metrics;
using BenchmarkDotNet.Attributes;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Protocols.Http2;
using Proxy.Server.Internal;

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

    /// <summary>
    /// The server's metrics: <c>Off</c> (no metrics object, the engine's null checks only), <c>Idle</c> (the "Proxy.Server"
    /// meter attached, nobody listening: a production host without an exporter), <c>Listened</c> (a MeterListener takes
    /// every measurement and sums it, about what an exporter's aggregation does per measurement).
    /// </summary>
    [Params(MetricsMode.Off, MetricsMode.Idle, MetricsMode.Listened)]
    public MetricsMode Metrics { get; set; }

    public enum MetricsMode
    {
        Off,
        Idle,
        Listened,
    }

    private ServiceProvider? _services;
    private MeterListener? _listener;
    private long _sum;

    [GlobalSetup]
    public void Setup()
    {
        if (RequestsPerInvoke % Concurrency != 0)
        {
            throw new InvalidOperationException($"{RequestsPerInvoke} requests do not split into waves of {Concurrency}.");
        }
        ServerMetrics? metrics = null;
        if (Metrics != MetricsMode.Off)
        {
            _services = new ServiceCollection().AddMetrics().BuildServiceProvider();
            metrics = new ServerMetrics(_services.GetRequiredService<IMeterFactory>());
        }
        if (Metrics == MetricsMode.Listened)
        {
            _listener = new MeterListener
            {
                InstrumentPublished = (instrument, listener) =>
                {
                    if (instrument.Meter.Name == ServerMetrics.MeterName)
                    {
                        listener.EnableMeasurementEvents(instrument);
                    }
                },
            };
            _listener.SetMeasurementEventCallback<long>((_, value, _, _) => Interlocked.Add(ref _sum, value));
            _listener.SetMeasurementEventCallback<int>((_, value, _, _) => Interlocked.Add(ref _sum, value));
            _listener.SetMeasurementEventCallback<double>((_, value, _, _) => Interlocked.Add(ref _sum, (long)value));
            _listener.Start();
        }
        // The requests say :scheme https (as grpc-dotnet behind TLS) over in-memory pipes: allowed explicitly since request
        // validation (RFC 9113 §8.3.1) refuses a scheme that is not the connection's.
        _client = Http2BenchClient.StartAsync(new GrpcUnaryHandler(), new Http2Options { AllowAlternateSchemes = true }, metrics)
            .GetAwaiter().GetResult();
        // One wave before measuring: it carries the cold request block and validates the responses.
        _client.RunWaveAsync(Concurrency).AsTask().GetAwaiter().GetResult();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _client.DisposeAsync().AsTask().GetAwaiter().GetResult();
        _listener?.Dispose();
        _services?.Dispose();
    }

    [Benchmark(OperationsPerInvoke = RequestsPerInvoke)]
    public async Task UnaryCalls()
    {
        for (int wave = RequestsPerInvoke / Concurrency; wave > 0; wave--)
        {
            await _client.RunWaveAsync(Concurrency);
        }
    }
}
