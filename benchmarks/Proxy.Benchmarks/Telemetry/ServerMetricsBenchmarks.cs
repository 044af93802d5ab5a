using System.Diagnostics.Metrics;
using BenchmarkDotNet.Attributes;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Codecs.Http2;
using Proxy.Protocols;
using Proxy.Server.Internal;
using Proxy.Transport;

namespace Proxy.Benchmarks.Telemetry;

/// <summary>
/// The "Proxy.Server" metric hooks one gRPC unary call on our server triggers, called directly: a stream started and
/// ended, one writer flush, one socket receive and one send. Single-threaded and nanosecond-scale, so unlike the
/// connection benchmark it stays readable on a noisy machine; compare with the per-request time of
/// <c>Http2ConnectionBenchmarks</c> for the share of a request. <c>Idle</c>: no listener (production without an exporter);
/// <c>Listened</c>: a MeterListener that sums every measurement.
/// </summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
public class ServerMetricsBenchmarks
{
    private ServiceProvider _services = null!;
    private MeterListener? _listener;
    private IProtocolMetrics _protocol = null!;
    private ISocketIoMetrics _io = null!;
    private long _sum;

    [Params(false, true)]
    public bool Listened { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        _services = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var metrics = new ServerMetrics(_services.GetRequiredService<IMeterFactory>());
        _protocol = metrics;
        _io = metrics;
        if (Listened)
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
            _listener.SetMeasurementEventCallback<long>((_, value, _, _) => _sum += value);
            _listener.SetMeasurementEventCallback<int>((_, value, _, _) => _sum += value);
            _listener.SetMeasurementEventCallback<double>((_, value, _, _) => _sum += (long)value);
            _listener.Start();
        }
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _listener?.Dispose();
        _services.Dispose();
    }

    /// <summary>What one unary call costs in hooks (the connection-level ones are per connection, not per call).</summary>
    [Benchmark]
    public void UnaryCallHooks()
    {
        var counted = _protocol.StreamStarted();
        _io.Received(120);
        if (_protocol.WriterBatchEnabled)
        {
            _protocol.WriterBatch(3, 96);
        }
        _io.Sent(96);
        if (counted)
        {
            _protocol.StreamEnded();
        }
    }

    /// <summary>A reset (rare, but tagged): the precomputed side/code tag array.</summary>
    [Benchmark]
    public void StreamReset() => _protocol.StreamReset(sent: false, Http2ErrorCode.Cancel);
}
