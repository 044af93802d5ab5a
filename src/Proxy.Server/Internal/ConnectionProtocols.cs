using Proxy.Protocols.Http1;
using Proxy.Protocols.Http2;

namespace Proxy.Server.Internal;

/// <summary>One HTTP connection engine (HTTP/1.1 or HTTP/2) running over a transport.</summary>
internal interface IConnectionProtocol
{
    /// <summary>Serves the connection until it closes; <paramref name="abort"/> tears it down at once.</summary>
    Task ProcessAsync(CancellationToken abort);

    /// <summary>Graceful stop: HTTP/2 sends GOAWAY and lets open streams finish; HTTP/1.1 closes after the current response.</summary>
    Task ShutdownAsync();
}

/// <summary>Creates the engines. The seam between the server and src/Proxy.Protocols.</summary>
internal interface IConnectionProtocolFactory
{
    IConnectionProtocol CreateHttp1(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time);

    IConnectionProtocol CreateHttp2(IDuplexPipe transport, Http2Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time);
}

/// <summary>
/// The real engines (Http1Connection, Http2Connection in Proxy.Protocols).
/// TODO(merge): the engines are written on other branches; the lead wires them here:
///   CreateHttp1 => adapter over new Http1Connection(transport, options, handler, metadata, time)
///   CreateHttp2 => adapter over new Http2Connection(...) with ShutdownAsync => GOAWAY.
/// </summary>
internal sealed class EngineProtocolFactory : IConnectionProtocolFactory
{
    public static readonly EngineProtocolFactory Instance = new();

    public IConnectionProtocol CreateHttp1(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => throw new NotImplementedException("Http1Connection is wired at merge (see EngineProtocolFactory).");

    public IConnectionProtocol CreateHttp2(IDuplexPipe transport, Http2Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => throw new NotImplementedException("Http2Connection is wired at merge (see EngineProtocolFactory).");
}
