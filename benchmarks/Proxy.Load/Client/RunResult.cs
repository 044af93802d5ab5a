using System.Globalization;
using System.Text;
using System.Text.Json;
using System.Text.Json.Serialization;
using Proxy.Load.Metrics;

namespace Proxy.Load.Client;

/// <summary>The figures of one run: one markdown row and one JSON object.</summary>
public sealed record RunResult
{
    public required DateTimeOffset Timestamp { get; init; }
    public required string Label { get; init; }
    public required string Scenario { get; init; }
    public required string Url { get; init; }
    public required string Protocol { get; init; }
    public required string Shape { get; init; }
    public required int Connections { get; init; }
    public required int Streams { get; init; }
    public required int Size { get; init; }

    /// <summary>gRPC: request payload bytes (<see cref="Size"/> is the response's); null otherwise.</summary>
    public int? RequestSize { get; init; }
    public required double WarmupSeconds { get; init; }
    public required double DurationSeconds { get; init; }
    public required long Requests { get; init; }
    public required double Rps { get; init; }
    public required long BytesRead { get; init; }
    public required long Errors { get; init; }
    public required long BadResponses { get; init; }
    public string? FirstError { get; init; }
    public required LatencySummary LatencyMs { get; init; }
    public SseSummary? Sse { get; init; }
    public TargetMetrics? Target { get; init; }

    /// <summary>Requests completed, zero errors and, for SSE, nothing lost and no reconnects.</summary>
    [JsonIgnore]
    public bool Clean => Requests > 0 && Errors == 0 && (Sse is null || (Sse.Lost == 0 && Sse.Reconnects == 0));

    private static readonly JsonSerializerOptions s_json = new(JsonSerializerDefaults.Web);

    public string ToJson() => JsonSerializer.Serialize(this, s_json);

    public const string MarkdownHeader =
        "| label | scenario | protocol | shape | size | RPS | mean ms | p50 ms | p90 ms | p99 ms | max ms | errors | lost | reconnects | CPU s | CPU ms/req | peak WS MB | threads |\n" +
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

    public string ToMarkdownRow()
    {
        var c = CultureInfo.InvariantCulture;
        var row = new StringBuilder();
        // gRPC with different request and response payloads: "request/response".
        var size = RequestSize is { } request && request != Size ? $"{request}/{Size}" : Size.ToString(c);
        row.Append(c, $"| {Label} | {Scenario} | {Protocol} | {Shape} | {size} | {Rps.ToString("N0", c)} ");
        row.Append(c, $"| {LatencyMs.Mean:F2} | {LatencyMs.P50:F2} | {LatencyMs.P90:F2} | {LatencyMs.P99:F2} | {LatencyMs.Max:F2} ");
        row.Append(c, $"| {Errors} | {Sse?.Lost ?? 0} | {Sse?.Reconnects ?? 0} ");
        if (Target is { } t)
        {
            row.Append(c, $"| {t.CpuSeconds:F2} | {t.CpuMsPerRequest:F4} | {t.PeakWorkingSetMB:F1} | {t.Threads} |");
        }
        else
        {
            row.Append("| - | - | - | - |");
        }

        return row.ToString();
    }
}

public sealed record LatencySummary(double Mean, double P50, double P90, double P99, double Max)
{
    public static LatencySummary From(LatencyHistogram h)
    {
        const double NsPerMs = 1_000_000;
        return new LatencySummary(
            Math.Round(h.Mean / NsPerMs, 4),
            Math.Round(h.ValueAtPercentile(50) / NsPerMs, 4),
            Math.Round(h.ValueAtPercentile(90) / NsPerMs, 4),
            Math.Round(h.ValueAtPercentile(99) / NsPerMs, 4),
            Math.Round(h.Max / NsPerMs, 4));
    }
}

/// <param name="Rate">Events per second per stream (0 with <paramref name="EverySeconds"/>).</param>
/// <param name="EverySeconds">One event every this many seconds per stream (--every), else null.</param>
public sealed record SseSummary(int Rate, long Events, long Lost, long Reconnects, int? EverySeconds = null);
