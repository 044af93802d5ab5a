namespace Proxy.Load.Client;

/// <summary>
/// One load scenario: <see cref="RunStreamAsync"/> is one closed-loop worker (one stream of one connection)
/// that runs until <see cref="RunState.Stopping"/> is cancelled.
/// </summary>
public abstract class Scenario
{
    protected Scenario(LoadOptions options) => Options = options;

    protected LoadOptions Options { get; }

    /// <summary>How many connections the handler of one "connection" may open (HTTP/1.1 SSE needs one per stream).</summary>
    public virtual int ConnectionsPerHandler => 1;

    public abstract Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state);

    public static Scenario Create(LoadOptions options) => options.Scenario switch
    {
        "grpc-unary" => new GrpcUnaryScenario(options),
        "grpc-server-streaming" => new GrpcServerStreamingScenario(options),
        "grpc-streaming" => new GrpcPingPongScenario(options),
        "http-get" => new HttpGetScenario(options),
        "http-post" => new HttpPostScenario(options),
        "sse" => new SseScenario(options),
        _ => throw new UsageException($"Unknown scenario '{options.Scenario}'."),
    };

    /// <summary>True when an exception is just the run ending (cancellation of the stop token).</summary>
    protected static bool IsStopping(RunState state) => state.Stopping.IsCancellationRequested;
}
