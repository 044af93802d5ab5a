using Microsoft.Extensions.Logging;

namespace Proxy.Server.Internal;

/// <summary>Source-generated log messages of the server.</summary>
internal static partial class ServerLog
{
    [LoggerMessage(1, LogLevel.Error, "Connection {ConnectionId}, request {TraceIdentifier}: unhandled exception in the application.")]
    public static partial void ApplicationError(ILogger logger, string connectionId, string traceIdentifier, Exception exception);

    [LoggerMessage(2, LogLevel.Debug, "Connection {ConnectionId}: completing the response failed.")]
    public static partial void ResponseCompletionFailed(ILogger logger, string connectionId, Exception exception);

    [LoggerMessage(3, LogLevel.Warning, "Connection {ConnectionId}: an OnCompleted callback failed.")]
    public static partial void OnCompletedFailed(ILogger logger, string connectionId, Exception exception);

    [LoggerMessage(4, LogLevel.Debug, "Bound {Address}")] // The host logs "Now listening on" from the addresses feature.
    public static partial void ListeningOn(ILogger logger, string address);

    [LoggerMessage(5, LogLevel.Warning, "Overriding address(es) '{Addresses}': binding to the endpoints configured in ProxyServerOptions instead. Set PreferHostingUrls to use the URLs.")]
    public static partial void OverridingAddresses(ILogger logger, string addresses);

    [LoggerMessage(6, LogLevel.Debug, "Connection {ConnectionId} from {RemoteEndPoint} accepted.")]
    public static partial void ConnectionAccepted(ILogger logger, string connectionId, EndPoint? remoteEndPoint);

    [LoggerMessage(7, LogLevel.Debug, "Connection {ConnectionId} speaks {Protocol}.")]
    public static partial void ProtocolSelected(ILogger logger, string connectionId, string protocol);

    [LoggerMessage(8, LogLevel.Warning, "Connection {ConnectionId} failed.")]
    public static partial void ConnectionFailed(ILogger logger, string connectionId, Exception exception);

    [LoggerMessage(9, LogLevel.Information, "Stopping: {Count} connection(s) asked to shut down; waiting for their open requests to finish (until the host's shutdown timeout, then they are aborted).")]
    public static partial void ShuttingDown(ILogger logger, int count);

    [LoggerMessage(10, LogLevel.Warning, "Shutdown timed out: aborting {Count} connection(s).")]
    public static partial void AbortingConnections(ILogger logger, int count);

    [LoggerMessage(11, LogLevel.Warning, "Host '{Host}' is not an IP address or 'localhost': binding to all interfaces.")]
    public static partial void BindingAnyForHostName(ILogger logger, string host);

    [LoggerMessage(12, LogLevel.Information, "No certificate configured for {Endpoint}: using the development certificate ({Subject}, expires {NotAfter}).")]
    public static partial void UsingDevelopmentCertificate(ILogger logger, string endpoint, string subject, DateTime notAfter);

    [LoggerMessage(14, LogLevel.Debug, "Connection {ConnectionId}, request {TraceIdentifier}: the client went away and the application stopped with {ExceptionType}: {Reason}")]
    public static partial void ApplicationStoppedByClientAbort(ILogger logger, string connectionId, string traceIdentifier, string exceptionType, string reason);

    [LoggerMessage(15, LogLevel.Information, "Connections: at most {Max} open at once (ProxyServer:MaxConcurrentConnections), from the open-file limit {FileLimit} less a reserve; raise the limit (ulimit -n, LimitNOFILE) for more.")]
    public static partial void ConnectionLimitFromFileLimit(ILogger logger, long max, long fileLimit);

    [LoggerMessage(16, LogLevel.Warning, "{Max} connections are open (ProxyServer:MaxConcurrentConnections): new connections wait in the listen backlog until one closes.")]
    public static partial void ConnectionLimitReached(ILogger logger, long max);

    [LoggerMessage(17, LogLevel.Warning, "Accepting a connection failed: {Reason}. New connections wait in the listen backlog; accepting again shortly. The open-file limit (ulimit -n, LimitNOFILE) or ProxyServer:MaxConcurrentConnections (now {Max}) may be too high for it.")]
    public static partial void AcceptOutOfResources(ILogger logger, string reason, long? max);

    [LoggerMessage(13, LogLevel.Debug, "Connection {ConnectionId}: IPv6 loopback bind failed; serving IPv4 only.")]
    public static partial void Ipv6LoopbackUnavailable(ILogger logger, string connectionId, Exception exception);
}
