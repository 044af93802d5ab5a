using System.Threading.Channels;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Http.Features;

namespace Proxy.Transport.InMemory;

// Owned by whoever accepts (one accept loop); ConnectAsync may be called from any thread.
/// <summary>
/// A transport without sockets: <see cref="ConnectAsync"/> gives the client end and queues the
/// server end for <see cref="AcceptAsync"/>. Product code, used by protocol tests and by hosts
/// that want to call the server in-process.
/// </summary>
public sealed class InMemoryConnectionListener : IConnectionListener
{
    private readonly Channel<ConnectionContext> _pending = Channel.CreateUnbounded<ConnectionContext>();
    private readonly PipeOptions _pipeOptions;
    private long _lastId;

    public InMemoryConnectionListener(EndPoint? endPoint = null, PipeOptions? pipeOptions = null)
    {
        EndPoint = endPoint ?? new IPEndPoint(IPAddress.Loopback, 0);
        _pipeOptions = pipeOptions ?? new PipeOptions(useSynchronizationContext: false);
    }

    public EndPoint EndPoint { get; }

    /// <summary>Opens a connection: returns the client end; the server end is handed to the next <see cref="AcceptAsync"/>.</summary>
    public ValueTask<InMemoryConnection> ConnectAsync(CancellationToken cancellationToken = default)
    {
        var (client, server) = DuplexPipe.CreatePair(_pipeOptions, _pipeOptions);
        var id = Interlocked.Increment(ref _lastId);
        var clientEndPoint = new IPEndPoint(IPAddress.Loopback, (int)(10000 + id % 50000));
        var serverSide = new InMemoryServerConnection("m" + id.ToString("x8", System.Globalization.CultureInfo.InvariantCulture),
            server, EndPoint, clientEndPoint);
        var clientSide = new InMemoryConnection(client, serverSide);
        if (!_pending.Writer.TryWrite(serverSide))
        {
            throw new InvalidOperationException("The listener is unbound.");
        }
        return ValueTask.FromResult(clientSide);
    }

    public async ValueTask<ConnectionContext?> AcceptAsync(CancellationToken cancellationToken = default)
    {
        try
        {
            return await _pending.Reader.ReadAsync(cancellationToken).ConfigureAwait(false);
        }
        catch (ChannelClosedException)
        {
            return null;
        }
    }

    public ValueTask UnbindAsync(CancellationToken cancellationToken = default)
    {
        _pending.Writer.TryComplete();
        return default;
    }

    public ValueTask DisposeAsync() => UnbindAsync();
}

/// <summary>The client end of an in-memory connection.</summary>
public sealed class InMemoryConnection : IAsyncDisposable
{
    private readonly InMemoryServerConnection _server;
    private Stream? _stream;

    internal InMemoryConnection(IDuplexPipe transport, InMemoryServerConnection server)
    {
        Transport = transport;
        _server = server;
    }

    /// <summary>The client's pipes: write requests to Output, read responses from Input.</summary>
    public IDuplexPipe Transport { get; }

    /// <summary>The server end (the ConnectionContext the listener yields).</summary>
    public ConnectionContext ServerConnection => _server;

    /// <summary>The client end as a stream (for SslStream or HttpClient-style clients).</summary>
    public Stream Stream => _stream ??= new DuplexPipeStream(Transport);

    /// <summary>Completes the client's output (the server reads end of stream).</summary>
    public ValueTask DisposeAsync()
    {
        Transport.Output.Complete();
        Transport.Input.Complete();
        return default;
    }
}

// Owned by the server-side connection handler; Abort may come from any thread.
internal sealed class InMemoryServerConnection : ConnectionContext, IConnectionEndPointFeature, IConnectionLifetimeFeature
{
    private readonly CancellationTokenSource _closed = new();
    private readonly FeatureCollection _features = new();
    private readonly IDuplexPipe _pipe;

    public InMemoryServerConnection(string id, IDuplexPipe transport, EndPoint local, EndPoint remote)
    {
        ConnectionId = id;
        _pipe = transport;
        Transport = transport;
        LocalEndPoint = local;
        RemoteEndPoint = remote;
        ConnectionClosed = _closed.Token;
        _features.Set<IConnectionEndPointFeature>(this);
        _features.Set<IConnectionLifetimeFeature>(this);
    }

    public override string ConnectionId { get; set; }
    public override IFeatureCollection Features => _features;
    public override IDictionary<object, object?> Items { get; set; } = new ConnectionItems();
    public override IDuplexPipe Transport { get; set; }
    public override CancellationToken ConnectionClosed { get; set; }
    public override EndPoint? LocalEndPoint { get; set; }
    public override EndPoint? RemoteEndPoint { get; set; }

    public override void Abort(ConnectionAbortedException abortReason)
    {
        // Both directions fail, as a reset socket would.
        _pipe.Input.CancelPendingRead();
        _pipe.Output.Complete(abortReason);
        try
        {
            _closed.Cancel();
        }
        catch (ObjectDisposedException)
        {
        }
    }

    public override ValueTask DisposeAsync()
    {
        _pipe.Input.Complete();
        _pipe.Output.Complete();
        _closed.Dispose();
        return default;
    }
}
