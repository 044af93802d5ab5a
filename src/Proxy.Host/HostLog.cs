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
}
