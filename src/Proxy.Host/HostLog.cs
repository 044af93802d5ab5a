namespace Proxy.Host;

internal static partial class HostLog
{
    [LoggerMessage(1, LogLevel.Information, "Proxy listening on {Addresses} ({Server}); config: {ConfigFile}")]
    public static partial void Listening(ILogger logger, string addresses, ProxyHostServer server, string configFile);

    [LoggerMessage(2, LogLevel.Information, "Demo backends: SSE on {SseAddress}, gRPC echo (h2c) on {GrpcAddress}")]
    public static partial void DemoStarted(ILogger logger, Uri sseAddress, Uri grpcAddress);

    [LoggerMessage(3, LogLevel.Information, "Try: {Command}")]
    public static partial void TryIt(ILogger logger, string command);

    [LoggerMessage(4, LogLevel.Error, "Config file '{ConfigFile}' was not reloaded: {Reason}; the last good configuration stays in use.")]
    public static partial void ConfigReloadFailed(ILogger logger, string configFile, string reason);

    [LoggerMessage(5, LogLevel.Information, "Stopping: open requests get up to {Timeout} to finish (event streams end now); press Ctrl+C again to stop at once.")]
    public static partial void Stopping(ILogger logger, TimeSpan timeout);

    [LoggerMessage(6, LogLevel.Information, "Stopped after {Elapsed}.")]
    public static partial void Stopped(ILogger logger, TimeSpan elapsed);

    [LoggerMessage(7, LogLevel.Warning, "Stopped at once after {Elapsed} (second signal): open requests were aborted.")]
    public static partial void StoppedAtOnce(ILogger logger, TimeSpan elapsed);

    [LoggerMessage(8, LogLevel.Information, "Admin listening on {Address} (dashboard /, /healthz, /readyz, /metrics, /config)")]
    public static partial void AdminListening(ILogger logger, Uri address);

    [LoggerMessage(9, LogLevel.Information, "Socket completions run {Mode} (" + SocketEngineDefaults.InlineCompletionsVariable + ")")]
    public static partial void SocketCompletions(ILogger logger, string mode);

    [LoggerMessage(10, LogLevel.Information, "Socket engine: {Engine} (ProxyServer:Sockets:Engine){Detail}")]
    public static partial void SocketEngine(ILogger logger, Proxy.Transport.Sockets.SocketEngine engine, string detail);
}
