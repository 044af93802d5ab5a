using System.IO.Pipelines;

namespace Proxy.Testing.Http2;

/// <summary>Two pipes joined as a connection: the server end and the client end of an in-memory transport.</summary>
public sealed class InMemoryDuplexPipe : IDuplexPipe
{
    private InMemoryDuplexPipe(PipeReader input, PipeWriter output)
    {
        Input = input;
        Output = output;
    }

    public PipeReader Input { get; }
    public PipeWriter Output { get; }

    /// <summary>Creates a connected pair; bytes written to one end's Output come out of the other end's Input.</summary>
    public static (InMemoryDuplexPipe Server, InMemoryDuplexPipe Client) CreatePair(PipeOptions? options = null)
        => CreatePair(options ?? PipeOptions.Default, options ?? PipeOptions.Default);

    /// <summary>A connected pair whose two directions have their own options (a reader scheduler per side).</summary>
    public static (InMemoryDuplexPipe Server, InMemoryDuplexPipe Client) CreatePair(PipeOptions clientToServerOptions, PipeOptions serverToClientOptions)
    {
        var clientToServer = new Pipe(clientToServerOptions);
        var serverToClient = new Pipe(serverToClientOptions);
        return (new InMemoryDuplexPipe(clientToServer.Reader, serverToClient.Writer),
                new InMemoryDuplexPipe(serverToClient.Reader, clientToServer.Writer));
    }
}

/// <summary>Adapts a delegate to <see cref="Proxy.Protocols.IHttpRequestHandler"/>.</summary>
public sealed class DelegateRequestHandler(Func<Proxy.Protocols.HttpExchange, Task> handle) : Proxy.Protocols.IHttpRequestHandler
{
    public Task HandleAsync(Proxy.Protocols.HttpExchange exchange) => handle(exchange);
}
