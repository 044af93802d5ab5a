using System.Globalization;

namespace Proxy.Load.Client;

/// <summary>The options of `run` (see README.md for each one).</summary>
public sealed record LoadOptions
{
    public static readonly string[] Scenarios =
        ["grpcnet-unary", "grpcnet-serverstreaming", "grpcnet-pingpong", "http-get", "http-post", "sse"];

    public required string Scenario { get; init; }

    public required Uri Url { get; init; }

    public int Connections { get; init; } = 1;

    public int Streams { get; init; } = 1;

    /// <summary>"2" or "1.1".</summary>
    public string Http { get; init; } = "2";

    public int Payload { get; init; }

    /// <summary>--request-size, or --payload without it.</summary>
    public int? RequestSize { get; init; }

    /// <summary>--response-size, or --payload without it.</summary>
    public int? ResponseSize { get; init; }

    /// <summary>gRPC: payload bytes of every request message.</summary>
    public int GrpcRequestSize => RequestSize ?? Payload;

    /// <summary>gRPC: the response_size asked for (payload bytes of every response message).</summary>
    public int GrpcResponseSize => ResponseSize ?? Payload;

    public int Size { get; init; } = 1024;

    public int Rate { get; init; } = 10;

    /// <summary>SSE: one event every this many seconds per stream instead of <see cref="Rate"/> a second (quiet streams).</summary>
    public int? EverySeconds { get; init; }

    /// <summary>Connections start evenly over this many seconds (users arriving), not all at once; 0: all at once.</summary>
    public double RampSeconds { get; init; }

    public double WarmupSeconds { get; init; } = 5;

    public double DurationSeconds { get; init; } = 15;

    public string Label { get; init; } = "target";

    public int? TargetPid { get; init; }

    public string? JsonPath { get; init; }

    public bool NoHeader { get; init; }

    public bool NoProgress { get; init; }

    public bool IsTls => Url.Scheme == Uri.UriSchemeHttps;

    public bool IsGrpc => Scenario.StartsWith("grpcnet-", StringComparison.Ordinal);

    /// <summary>gRPC is HTTP/2 whatever --http says.</summary>
    public Version HttpVersion => IsGrpc || Http == "2" ? System.Net.HttpVersion.Version20 : System.Net.HttpVersion.Version11;

    public string Protocol => HttpVersion == System.Net.HttpVersion.Version20
        ? (IsTls ? "h2" : "h2c")
        : (IsTls ? "https/1.1" : "http/1.1");

    public string Shape => $"{Connections}x{Streams}";

    /// <summary>The size column: response payload (gRPC), body size (HTTP), events per second (SSE; 0 with --every).</summary>
    public int SizeColumn => IsGrpc ? GrpcResponseSize : Scenario == "sse" ? (EverySeconds is null ? Rate : 0) : Size;

    /// <summary>Parses `run` arguments (after the verb); throws <see cref="UsageException"/> on anything wrong.</summary>
    public static LoadOptions Parse(IReadOnlyList<string> args)
    {
        var values = CommandLine.Parse(args,
            ["--scenario", "--url", "--connections", "--streams", "--http", "--payload", "--request-size", "--response-size", "--size", "--rate",
             "--every", "--ramp", "--warmup", "--duration",
             "--label", "--target-pid", "--json"],
            ["--no-header", "--no-progress"]);

        var scenario = values.GetValueOrDefault("--scenario") ?? throw new UsageException("--scenario is required.");
        if (!Scenarios.Contains(scenario))
        {
            throw new UsageException($"Unknown scenario '{scenario}': one of {string.Join(", ", Scenarios)}.");
        }

        var url = values.GetValueOrDefault("--url") ?? throw new UsageException("--url is required.");
        if (!Uri.TryCreate(url, UriKind.Absolute, out var uri) || (uri.Scheme != Uri.UriSchemeHttp && uri.Scheme != Uri.UriSchemeHttps))
        {
            throw new UsageException($"--url '{url}' is not an http:// or https:// address.");
        }

        var http = values.GetValueOrDefault("--http") ?? "2";
        if (http is not ("2" or "1.1"))
        {
            throw new UsageException("--http is 2 or 1.1.");
        }

        var options = new LoadOptions
        {
            Scenario = scenario,
            Url = uri,
            Http = http,
            Connections = Int(values, "--connections", 1, min: 1),
            Streams = Int(values, "--streams", 1, min: 1),
            Payload = Int(values, "--payload", 0, min: 0),
            RequestSize = values.ContainsKey("--request-size") ? Int(values, "--request-size", 0, min: 0) : null,
            ResponseSize = values.ContainsKey("--response-size") ? Int(values, "--response-size", 0, min: 0) : null,
            Size = Int(values, "--size", 1024, min: 0),
            Rate = Int(values, "--rate", 10, min: 1),
            EverySeconds = values.ContainsKey("--every") ? Int(values, "--every", 1, min: 1) : null,
            RampSeconds = Seconds(values, "--ramp", 0),
            WarmupSeconds = Seconds(values, "--warmup", 5),
            DurationSeconds = Seconds(values, "--duration", 15),
            Label = values.GetValueOrDefault("--label") ?? "target",
            TargetPid = values.ContainsKey("--target-pid") ? Int(values, "--target-pid", 0, min: 1) : null,
            JsonPath = values.GetValueOrDefault("--json"),
            NoHeader = values.ContainsKey("--no-header"),
            NoProgress = values.ContainsKey("--no-progress"),
        };
        if (options.EverySeconds is not null && (values.ContainsKey("--rate") || scenario != "sse"))
        {
            throw new UsageException("--every is for the sse scenario, instead of --rate.");
        }

        if (options.RampSeconds < 0 || options.RampSeconds > options.WarmupSeconds)
        {
            throw new UsageException("--ramp must be between 0 and --warmup: the measured window starts with every connection open.");
        }

        if (options.DurationSeconds <= 0)
        {
            throw new UsageException("--duration must be positive.");
        }

        return options;
    }

    private static int Int(Dictionary<string, string?> values, string name, int fallback, int min)
    {
        if (values.GetValueOrDefault(name) is not { } text)
        {
            return fallback;
        }

        if (!int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var value) || value < min)
        {
            throw new UsageException($"{name} '{text}' is not a whole number >= {min}.");
        }

        return value;
    }

    private static double Seconds(Dictionary<string, string?> values, string name, double fallback)
    {
        if (values.GetValueOrDefault(name) is not { } text)
        {
            return fallback;
        }

        if (!double.TryParse(text, NumberStyles.Float, CultureInfo.InvariantCulture, out var value) || value < 0)
        {
            throw new UsageException($"{name} '{text}' is not a number of seconds >= 0.");
        }

        return value;
    }
}

/// <summary>A command line that cannot be run (exit code 2).</summary>
public sealed class UsageException(string message) : Exception(message);

/// <summary>`--name value` pairs and `--flag`s, nothing else.</summary>
public static class CommandLine
{
    public static Dictionary<string, string?> Parse(IReadOnlyList<string> args, string[] withValue, string[] flags)
    {
        var values = new Dictionary<string, string?>(StringComparer.Ordinal);
        for (var i = 0; i < args.Count; i++)
        {
            var name = args[i];
            if (flags.Contains(name))
            {
                values[name] = null;
            }
            else if (withValue.Contains(name))
            {
                if (i + 1 >= args.Count)
                {
                    throw new UsageException($"{name} needs a value.");
                }

                values[name] = args[++i];
            }
            else
            {
                throw new UsageException($"Unknown option '{name}'.");
            }
        }

        return values;
    }
}
