using System.Diagnostics;
using Proxy.Load.Metrics;

namespace Proxy.Load.Client;

/// <summary>The phase every worker looks at: only completions while <see cref="Measuring"/> count.</summary>
// Written by the runner, read by all workers.
public sealed class RunState
{
    private volatile bool _measuring;
    private string? _firstError;

    public RunState(CancellationToken stopping) => Stopping = stopping;

    /// <summary>Cancelled when the measured window is over: workers leave their loops.</summary>
    public CancellationToken Stopping { get; }

    public bool Measuring
    {
        get => _measuring;
        set => _measuring = value;
    }

    /// <summary>The first failure seen (any phase), to explain a non-zero error count.</summary>
    public string? FirstError => Volatile.Read(ref _firstError);

    public void NoteError(string message) => Interlocked.CompareExchange(ref _firstError, message, null);
}

/// <summary>One worker's counters and latencies (single writer; the progress line reads the counters racily).</summary>
// Owned by one worker (one stream of one connection).
public sealed class WorkerStats
{
    private long _requests;
    private long _errors;

    public LatencyHistogram Latency { get; } = new();

    public long Requests => Volatile.Read(ref _requests);

    /// <summary>All failures: exceptions and bad responses.</summary>
    public long Errors => Volatile.Read(ref _errors);

    /// <summary>Failures that were a response (wrong status, grpc-status, length, framing), not an exception.</summary>
    public long BadResponses { get; private set; }

    public long BytesRead { get; private set; }

    /// <summary>Requests seen in any phase: the progress line's count.</summary>
    public long AllRequests;

    public long Lost { get; private set; }

    public long Reconnects { get; private set; }

    /// <summary>A completed request whose latency started at <paramref name="startTimestamp"/> (Stopwatch ticks).</summary>
    public void Completed(RunState state, long startTimestamp, long bytes) =>
        CompletedWithLatency(state, ToNanoseconds(Stopwatch.GetTimestamp() - startTimestamp), bytes);

    public void CompletedWithLatency(RunState state, long latencyNs, long bytes)
    {
        Volatile.Write(ref AllRequests, AllRequests + 1);
        if (state.Measuring)
        {
            Volatile.Write(ref _requests, _requests + 1);
            Latency.Record(latencyNs);
            BytesRead += bytes;
        }
    }

    public void BadResponse(RunState state, string why)
    {
        state.NoteError(why);
        if (state.Measuring)
        {
            BadResponses++;
            Volatile.Write(ref _errors, _errors + 1);
        }
    }

    public void Failed(RunState state, Exception exception)
    {
        state.NoteError(Describe(exception));
        if (state.Measuring)
        {
            Volatile.Write(ref _errors, _errors + 1);
        }
    }

    /// <summary>The exception and its inner ones: "An error occurred while sending the request" alone says nothing of why.</summary>
    private static string Describe(Exception exception)
    {
        var text = $"{exception.GetType().Name}: {exception.Message}";
        for (var inner = exception.InnerException; inner is not null; inner = inner.InnerException)
        {
            text += $" <- {inner.GetType().Name}: {inner.Message}";
        }

        return text;
    }

    public void LostEvents(RunState state, long count)
    {
        state.NoteError($"{count} SSE event(s) lost");
        if (state.Measuring)
        {
            Lost += count;
        }
    }

    public void Reconnected(RunState state)
    {
        if (state.Measuring)
        {
            Reconnects++;
        }
    }

    public static long ToNanoseconds(long stopwatchTicks) =>
        (long)(stopwatchTicks * (1_000_000_000.0 / Stopwatch.Frequency));
}
