namespace Proxy.Load.Client;

/// <summary>
/// One load scenario: <see cref="OpenConnection"/> is one of the C connections, <see cref="RunStreamAsync"/> one
/// closed-loop worker (one stream of that connection) that runs until <see cref="RunState.Stopping"/> is
/// cancelled. S workers share each connection.
/// </summary>
public abstract class Scenario
{
    protected Scenario(LoadOptions options) => Options = options;

    protected LoadOptions Options { get; }

    /// <summary>A new connection: a client with its own handler, disposed when the run ends.</summary>
    public abstract IDisposable OpenConnection();

    public abstract Task RunStreamAsync(IDisposable connection, WorkerStats stats, RunState state);

    public static Scenario Create(LoadOptions options) => options.Scenario switch
    {
        "grpcnet-unary" => new GrpcNetUnaryScenario(options),
        "grpcnet-serverstreaming" => new GrpcNetServerStreamingScenario(options),
        "grpcnet-pingpong" => new GrpcNetPingPongScenario(options),
        "http-get" => new HttpGetScenario(options),
        "http-post" => new HttpPostScenario(options),
        "sse" => new SseScenario(options),
        _ => throw new UsageException($"Unknown scenario '{options.Scenario}'."),
    };

    /// <summary>True when an exception is just the run ending (cancellation of the stop token).</summary>
    protected static bool IsStopping(RunState state) => state.Stopping.IsCancellationRequested;
}

/// <summary>A scenario whose connections are of one type: the runner stays untyped, the workers do not.</summary>
public abstract class Scenario<TConnection>(LoadOptions options) : Scenario(options)
    where TConnection : IDisposable
{
    public sealed override IDisposable OpenConnection() => Open();

    public sealed override Task RunStreamAsync(IDisposable connection, WorkerStats stats, RunState state) =>
        RunStreamAsync((TConnection)connection, stats, state);

    protected abstract TConnection Open();

    public abstract Task RunStreamAsync(TConnection connection, WorkerStats stats, RunState state);
}

/// <summary>The HTTP and SSE scenarios: a connection is an <see cref="HttpMessageInvoker"/> over its own handler.</summary>
public abstract class HttpClientScenario(LoadOptions options) : Scenario<HttpMessageInvoker>(options)
{
    /// <summary>How many connections the handler of one "connection" may open (HTTP/1.1 SSE needs one per stream).</summary>
    public virtual int ConnectionsPerHandler => 1;

    protected sealed override HttpMessageInvoker Open() => ConnectionFactory.Create(ConnectionsPerHandler);
}
