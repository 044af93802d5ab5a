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

/// <summary>The real engines from Proxy.Protocols.</summary>
internal sealed class EngineProtocolFactory : IConnectionProtocolFactory
{
    public static readonly EngineProtocolFactory Instance = new();

    public IConnectionProtocol CreateHttp1(IDuplexPipe transport, Http1Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => new Http1Protocol(transport, options, handler, metadata, time);

    public IConnectionProtocol CreateHttp2(IDuplexPipe transport, Http2Options options, IHttpRequestHandler handler, ConnectionMetadata metadata, TimeProvider time)
        => new Http2Protocol(new Http2Connection(transport, options, handler, metadata, time));
}

/// <summary>HTTP/2 engine behind the server seam; shutdown is the engine's two-phase GOAWAY (RFC 9113 §6.8).</summary>
internal sealed class Http2Protocol(Http2Connection connection) : IConnectionProtocol
{
    public Task ProcessAsync(CancellationToken abort) => connection.ProcessAsync(abort);

    public Task ShutdownAsync() => connection.ShutdownAsync();
}
