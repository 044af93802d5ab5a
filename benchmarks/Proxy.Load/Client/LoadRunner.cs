using System.Diagnostics;
using System.Globalization;
using Proxy.Load.Metrics;

namespace Proxy.Load.Client;

/// <summary>
/// Runs one scenario: C connections x S closed-loop streams, warm-up, the measured window (with /proc sampling
/// of the target), then stops every worker and sums their figures.
/// </summary>
public static class LoadRunner
{
    private static async Task StartLaterAsync(TimeSpan delay, Func<Task> run, CancellationToken stopping)
    {
        try
        {
            await Task.Delay(delay, stopping);
        }
        catch (OperationCanceledException)
        {
            return;
        }

        await run();
    }

    public static async Task<RunResult> RunAsync(LoadOptions options, TextWriter? progress)
    {
        var scenario = Scenario.Create(options);
        using var stop = new CancellationTokenSource();
        var state = new RunState(stop.Token);
        var connections = Enumerable.Range(0, options.Connections)
            .Select(_ => scenario.OpenConnection())
            .ToList();
        var stats = new List<WorkerStats>();
        var workers = new List<Task>();
        try
        {
            var index = 0;
            foreach (var connection in connections)
            {
                // --ramp: connection i starts at i/C of the ramp (users arriving), its streams together.
                var start = TimeSpan.FromSeconds(options.RampSeconds * index++ / options.Connections);
                for (var s = 0; s < options.Streams; s++)
                {
                    var worker = new WorkerStats();
                    stats.Add(worker);
                    workers.Add(start == TimeSpan.Zero
                        ? Task.Run(() => scenario.RunStreamAsync(connection, worker, state))
                        : StartLaterAsync(start, () => scenario.RunStreamAsync(connection, worker, state), state.Stopping));
                }
            }

            using var progressStop = new CancellationTokenSource();
            var phase = "warmup";
            var phaseStart = Stopwatch.GetTimestamp();
            var phaseLength = options.WarmupSeconds;
            var progressTask = progress is null
                ? Task.CompletedTask
                : ProgressLoopAsync(progress, stats, () => (phase, Stopwatch.GetElapsedTime(phaseStart).TotalSeconds, phaseLength), progressStop.Token);

            if (options.WarmupSeconds > 0)
            {
                await Task.Delay(TimeSpan.FromSeconds(options.WarmupSeconds));
            }

            var sampler = options.TargetPid is { } pid ? new ProcessSampler(pid) : null;
            sampler?.Start();
            phase = "measure";
            phaseLength = options.DurationSeconds;
            phaseStart = Stopwatch.GetTimestamp();
            state.Measuring = true;
            await Task.Delay(TimeSpan.FromSeconds(options.DurationSeconds));
            state.Measuring = false;
            var measured = Stopwatch.GetElapsedTime(phaseStart).TotalSeconds;

            var total = new LatencyHistogram();
            long requests = 0, errors = 0, bad = 0, bytes = 0, lost = 0, reconnects = 0;
            foreach (var worker in stats)
            {
                requests += worker.Requests;
                errors += worker.Errors;
                bad += worker.BadResponses;
                bytes += worker.BytesRead;
                lost += worker.Lost;
                reconnects += worker.Reconnects;
            }

            var target = sampler is null ? null : await sampler.StopAsync(requests);

            progressStop.Cancel();
            await progressTask;
            stop.Cancel();
            await Task.WhenAny(Task.WhenAll(workers), Task.Delay(TimeSpan.FromSeconds(10)));
            // Histograms only once the workers are gone (they are single-writer, unsynchronised).
            foreach (var worker in stats)
            {
                total.Add(worker.Latency);
            }

            return new RunResult
            {
                Timestamp = DateTimeOffset.UtcNow,
                Label = options.Label,
                Scenario = options.Scenario,
                Url = options.Url.OriginalString,
                Protocol = options.Protocol,
                Shape = options.Shape,
                Connections = options.Connections,
                Streams = options.Streams,
                Size = options.SizeColumn,
                RequestSize = options.IsGrpc ? options.GrpcRequestSize : null,
                WarmupSeconds = options.WarmupSeconds,
                DurationSeconds = Math.Round(measured, 3),
                Requests = requests,
                Rps = Math.Round(requests / measured, 1),
                BytesRead = bytes,
                Errors = errors,
                BadResponses = bad,
                FirstError = state.FirstError,
                LatencyMs = LatencySummary.From(total),
                Sse = options.Scenario == "sse" ? new SseSummary(options.EverySeconds is null ? options.Rate : 0, requests, lost, reconnects, options.EverySeconds) : null,
                Target = target,
            };
        }
        finally
        {
            stop.Cancel();
            foreach (var connection in connections)
            {
                connection.Dispose();
            }
        }
    }

    private static async Task ProgressLoopAsync(
        TextWriter output, List<WorkerStats> stats, Func<(string Phase, double Elapsed, double Length)> phase, CancellationToken stop)
    {
        using var timer = new PeriodicTimer(TimeSpan.FromSeconds(1));
        long lastCount = 0;
        var lastTime = Stopwatch.GetTimestamp();
        try
        {
            while (await timer.WaitForNextTickAsync(stop))
            {
                long count = 0, errors = 0;
                foreach (var worker in stats)
                {
                    count += Volatile.Read(ref worker.AllRequests);
                    errors += worker.Errors;
                }

                var now = Stopwatch.GetTimestamp();
                var rps = (count - lastCount) / Stopwatch.GetElapsedTime(lastTime, now).TotalSeconds;
                (lastCount, lastTime) = (count, now);
                var (name, elapsed, length) = phase();
                output.Write(string.Create(CultureInfo.InvariantCulture,
                    $"\r[{name,-7} {elapsed,3:F0}s/{length:F0}s] rps {rps,10:N0}  errors {errors}   "));
                output.Flush();
            }
        }
        catch (OperationCanceledException)
        {
        }

        output.Write('\n');
        output.Flush();
    }
}
