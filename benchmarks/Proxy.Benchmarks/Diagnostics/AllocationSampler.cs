using System.Diagnostics.Tracing;
using Proxy.Benchmarks.Http1;
using Proxy.Benchmarks.Http2;
using Proxy.Protocols.Http1;
using Proxy.Protocols.Http2;

namespace Proxy.Benchmarks.Diagnostics;

/// <summary>
/// Answers "what are the bytes per request made of?" for the connection benchmark, which BenchmarkDotNet's
/// MemoryDiagnoser only totals. Runs many unary calls and samples the runtime's GCAllocationTick events
/// (one per ~100 KB allocated, naming the type of the object that crossed the threshold), so each type's
/// share is an estimate proportional to the bytes it allocates. Every thread is sampled.
/// </summary>
/// <remarks>Usage: <c>dotnet run -c Release --project benchmarks/Proxy.Benchmarks -- --alloc-sample [concurrency] [requests]</c>
/// (HTTP/2), or <c>-- --alloc-sample-h1 [engine|aspnetcore] [depth] [requests]</c> (HTTP/1.1).</remarks>
internal static class AllocationSampler
{
    public static async Task RunAsync(int concurrency, int requests)
    {
        requests -= requests % concurrency;
        await using var client = await Http2BenchClient.StartAsync(new GrpcUnaryHandler(), new Http2Options());
        await SampleAsync($"HTTP/2 gRPC unary, concurrency {concurrency}", requests, () => client.RunWaveAsync(concurrency), concurrency);
    }

    /// <summary>The HTTP/1.1 connection benchmark's keep-alive GETs: <paramref name="stack"/> "engine" or "aspnetcore".</summary>
    public static async Task RunHttp1Async(string stack, int depth, int requests)
    {
        requests -= requests % depth;
        AspNetCoreHost? host = null;
        Http1BenchClient client;
        if (stack == "aspnetcore")
        {
            host = await AspNetCoreHost.StartAsync();
            client = Http1BenchClient.Start(host.ServeHttp1Async, SmallBodyHandler.Body.Length);
        }
        else
        {
            var handler = new SmallBodyHandler();
            client = Http1BenchClient.Start(
                transport => new Http1Connection(transport, new Http1Options(), handler, new() { ConnectionId = "bench" }, TimeProvider.System)
                    .ProcessAsync(CancellationToken.None),
                SmallBodyHandler.Body.Length);
        }
        try
        {
            await SampleAsync($"HTTP/1.1 GET /size/100 ({stack}), depth {depth}", requests, () => client.RunBatchAsync(depth), depth);
        }
        finally
        {
            await client.DisposeAsync();
            if (host is not null)
            {
                await host.DisposeAsync();
            }
        }
    }

    private static async Task SampleAsync(string what, int requests, Func<ValueTask> batch, int perBatch)
    {
        // Warm up long enough for tiered compilation to finish: until then tier-0 and ReadyToRun code
        // allocates where tier-1 code does not (boxing in generic span helpers, for one).
        var warmUp = System.Diagnostics.Stopwatch.StartNew();
        while (warmUp.Elapsed < TimeSpan.FromSeconds(3))
        {
            await batch();
        }

        using var listener = new AllocationTickListener();
        long before = GC.GetTotalAllocatedBytes(precise: true);
        for (int done = 0; done < requests; done += perBatch)
        {
            await batch();
        }
        long total = GC.GetTotalAllocatedBytes(precise: true) - before;
        await Task.Delay(500); // runtime events reach listeners asynchronously
        listener.Dispose();

        var samples = listener.Snapshot();
        long sampled = samples.Sum(s => s.Value);
        Console.WriteLine($"{what}: {requests} requests, {total / (double)requests:F0} B/request allocated (all threads), {samples.Sum(s => s.Count)} samples.");
        Console.WriteLine($"{"Type (size of the sampled object)",-100} {"~B/request",10} {"share",6}");
        foreach (var (type, bytes, _) in samples.OrderByDescending(s => s.Value).Take(30))
        {
            double share = bytes / (double)sampled;
            Console.WriteLine($"{type,-100} {share * total / requests,10:F0} {share,6:P1}");
        }
    }

    // Owned by the runtime's event dispatch thread (writes) and the sampler (reads after Dispose).
    private sealed class AllocationTickListener : EventListener
    {
        private readonly Dictionary<string, (long Bytes, int Count)> _byType = new();
        private readonly Lock _lock = new();

        public List<(string Type, long Value, int Count)> Snapshot()
        {
            lock (_lock)
            {
                return _byType.Select(kv => (kv.Key, kv.Value.Bytes, kv.Value.Count)).ToList();
            }
        }

        protected override void OnEventSourceCreated(EventSource source)
        {
            if (source.Name == "Microsoft-Windows-DotNETRuntime")
            {
                EnableEvents(source, EventLevel.Verbose, (EventKeywords)0x1); // GC keyword: AllocationTick at Verbose
            }
        }

        protected override void OnEventWritten(EventWrittenEventArgs e)
        {
            if (e.EventName is null || !e.EventName.StartsWith("GCAllocationTick", StringComparison.Ordinal) || e.PayloadNames is null || e.Payload is null)
            {
                return;
            }
            int typeIndex = e.PayloadNames.IndexOf("TypeName");
            int amountIndex = e.PayloadNames.IndexOf("AllocationAmount64");
            int sizeIndex = e.PayloadNames.IndexOf("ObjectSize");
            string type = typeIndex >= 0 ? e.Payload[typeIndex] as string ?? "?" : "?";
            if (sizeIndex >= 0)
            {
                type += $" ({e.Payload[sizeIndex]} B)"; // the sampled object's size tells apart, say, short and long strings
            }
            long amount = amountIndex >= 0 ? Convert.ToInt64(e.Payload[amountIndex]) : 100_000;
            lock (_lock)
            {
                _byType.TryGetValue(type, out var current);
                _byType[type] = (current.Bytes + amount, current.Count + 1);
            }
        }
    }
}
