using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading.Channels;
using Proxy.Codecs.Http2;
using Proxy.Testing.Http2;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// A cleartext HTTP/2 backend (prior knowledge) on a real socket whose connections follow a script: a
/// <see cref="TcpListener"/> on 127.0.0.1:0 accepts in a loop and hands each accepted socket, as a
/// <see cref="ScriptedBackendConnection"/> (an <see cref="Http2TestPeer"/> playing the server), to the script.
/// </summary>
/// <remarks>
/// Script failures are collected in <see cref="Faults"/> (a test asserts it is empty): an exception thrown on the
/// backend's side would otherwise only show up as a confusing outcome at the client.
/// </remarks>
// Owned by one test. The accept loop and the scripts run on their own tasks; the members used by the test are thread-safe.
public sealed class ScriptedHttp2Backend : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly Func<ScriptedBackendConnection, Task> _script;
    private readonly CancellationTokenSource _stop = new();
    private readonly ConcurrentQueue<ScriptedBackendConnection> _connections = new();
    private readonly ConcurrentQueue<Task> _scripts = new();
    private readonly ConcurrentQueue<Exception> _faults = new();
    private readonly Task _acceptLoop;
    private int _connectionCount;

    private ScriptedHttp2Backend(Func<ScriptedBackendConnection, Task> script)
    {
        _script = script;
        _listener.Start();
        Address = new Uri($"http://127.0.0.1:{((IPEndPoint)_listener.LocalEndpoint).Port}/");
        _acceptLoop = AcceptLoopAsync();
    }

    /// <summary>Starts listening; <paramref name="script"/> runs once per accepted connection, after the greeting.</summary>
    public static ScriptedHttp2Backend Start(Func<ScriptedBackendConnection, Task> script) => new(script);

    /// <summary>The destination address, e.g. http://127.0.0.1:41234/.</summary>
    public Uri Address { get; }

    /// <summary>Connections accepted so far.</summary>
    public int ConnectionCount => Volatile.Read(ref _connectionCount);

    /// <summary>Exceptions the scripts (or the greetings) threw.</summary>
    public IReadOnlyCollection<Exception> Faults => _faults;

    private async Task AcceptLoopAsync()
    {
        while (!_stop.IsCancellationRequested)
        {
            Socket socket;
            try
            {
                socket = await _listener.AcceptSocketAsync(_stop.Token);
            }
            catch (Exception) when (_stop.IsCancellationRequested)
            {
                return;
            }

            var connection = new ScriptedBackendConnection(Interlocked.Increment(ref _connectionCount), socket, _stop.Token);
            _connections.Enqueue(connection);
            _scripts.Enqueue(RunAsync(connection));
        }
    }

    private async Task RunAsync(ScriptedBackendConnection connection)
    {
        try
        {
            await connection.GreetAsync();
            await _script(connection);
        }
        catch (Exception ex) when (!_stop.IsCancellationRequested)
        {
            _faults.Enqueue(ex);
        }
        catch (Exception)
        {
            // Torn down by DisposeAsync: whatever the script was waiting for is gone.
        }
    }

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        _listener.Stop();
        await _acceptLoop;
        foreach (var connection in _connections)
        {
            await connection.DisposeAsync();
        }

        try
        {
            await Task.WhenAll(_scripts).WaitAsync(TimeSpan.FromSeconds(10));
        }
        catch (TimeoutException)
        {
            // A script still waiting on the test: it ends on its own bound; nothing of it is asserted any more.
        }
    }
}

/// <summary>
/// One accepted connection of a <see cref="ScriptedHttp2Backend"/>, greeted (preface and SETTINGS read, our empty SETTINGS
/// sent, theirs acknowledged). A read loop then owns the receiving side: it acknowledges SETTINGS, answers PINGs, decodes
/// request HEADERS into <see cref="NextRequestAsync"/> and records the proxy's RST_STREAM and GOAWAY frames; the script
/// only sends.
/// </summary>
// The read loop owns the peer's receiving side; sends are serialised here (HPACK encoding included, so header blocks
// reach the wire in the order they were encoded).
public sealed class ScriptedBackendConnection : IAsyncDisposable
{
    private readonly Socket _socket;
    private readonly Channel<Http2TestHeaders> _requests = Channel.CreateUnbounded<Http2TestHeaders>();
    private readonly TaskCompletionSource _closed = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly SemaphoreSlim _headersLock = new(1, 1);
    private readonly ConcurrentQueue<Http2TestFrame> _controlFrames = new();
    private readonly ConcurrentDictionary<int, (MemoryStream Bytes, TaskCompletionSource<byte[]> Done)> _bodies = new();
    private Task _readLoop = Task.CompletedTask;
    private int _disposed;

    internal ScriptedBackendConnection(int index, Socket socket, CancellationToken stopping)
    {
        Index = index;
        Stopping = stopping;
        _socket = socket;
        Peer = Http2TestPeer.Over(socket);
    }

    /// <summary>1 for the first connection the backend accepted, 2 for the next...</summary>
    public int Index { get; }

    /// <summary>Cancelled when the backend is disposed: scripts waiting on the test wait with it.</summary>
    public CancellationToken Stopping { get; }

    /// <summary>The scripted peer: use it to send (its receiving side belongs to the read loop).</summary>
    public Http2TestPeer Peer { get; }

    /// <summary>Completes when the proxy closed the connection (end of input or a reset).</summary>
    public Task Closed => _closed.Task;

    /// <summary>RST_STREAM and GOAWAY frames the proxy sent on this connection, in order.</summary>
    public IReadOnlyCollection<Http2TestFrame> ControlFrames => _controlFrames;

    internal async Task GreetAsync()
    {
        await Peer.ExpectClientPrefaceAsync();
        await Peer.SendSettingsAsync();
        await Peer.SendSettingsAckAsync();
        Peer.ReceiveTimeout = Timeout.InfiniteTimeSpan; // the read loop waits for the proxy as long as the test runs
        _readLoop = ReadLoopAsync();
    }

    private async Task ReadLoopAsync()
    {
        try
        {
            while (await Peer.TryReceiveFrameAsync() is { } frame)
            {
                switch (frame.Type)
                {
                    case Http2FrameType.Settings when !frame.IsAck:
                        await Peer.SendSettingsAckAsync();
                        break;
                    case Http2FrameType.Ping when !frame.IsAck:
                        await Peer.SendPingAsync(frame.AsPing().OpaqueData, ack: true);
                        break;
                    case Http2FrameType.Headers:
                        _requests.Writer.TryWrite(await Peer.DecodeHeaderBlockAsync(frame));
                        break;
                    case Http2FrameType.RstStream or Http2FrameType.GoAway:
                        _controlFrames.Enqueue(frame);
                        break;
                    case Http2FrameType.Data:
                        var body = BodyEntry(frame.StreamId);
                        foreach (var segment in frame.AsData().Data)
                        {
                            body.Bytes.Write(segment.Span);
                        }
                        if (frame.EndStream)
                        {
                            body.Done.TrySetResult(body.Bytes.ToArray());
                        }
                        break;
                }
            }
        }
        catch (Exception)
        {
            // A reset or our own close: either way the connection is over.
        }
        finally
        {
            _requests.Writer.TryComplete();
            _closed.TrySetResult();
        }
    }

    private (MemoryStream Bytes, TaskCompletionSource<byte[]> Done) BodyEntry(int streamId) =>
        _bodies.GetOrAdd(streamId, static _ => (new MemoryStream(), new TaskCompletionSource<byte[]>(TaskCreationOptions.RunContinuationsAsynchronously)));

    /// <summary>The request body of a stream, once its END_STREAM arrived (DATA frames; a request that ends on HEADERS has none).</summary>
    public Task<byte[]> RequestBodyAsync(int streamId) => BodyEntry(streamId).Done.Task.WaitAsync(RelayProxy.Bound);

    /// <summary>The next request head the proxy sent (HEADERS of a new stream). Fails if the connection closes first.</summary>
    public async Task<Http2TestHeaders> NextRequestAsync()
    {
        try
        {
            return await _requests.Reader.ReadAsync().AsTask().WaitAsync(RelayProxy.Bound);
        }
        catch (ChannelClosedException)
        {
            throw new InvalidOperationException($"Backend connection {Index} closed before the next request arrived.");
        }
    }

    /// <summary>Every request head until the proxy closes the connection.</summary>
    public IAsyncEnumerable<Http2TestHeaders> RequestsAsync() => _requests.Reader.ReadAllAsync();

    /// <summary>A response head (content-type text/plain), optionally ending the stream.</summary>
    public async Task SendResponseHeadersAsync(int streamId, bool endStream = false, int status = 200)
    {
        await _headersLock.WaitAsync();
        try
        {
            await Peer.SendResponseHeadersAsync(streamId, status, endStream, ("content-type", "text/plain"));
        }
        finally
        {
            _headersLock.Release();
        }
    }

    public Task SendDataAsync(int streamId, string text, bool endStream) => Peer.SendDataAsync(streamId, Encoding.UTF8.GetBytes(text), endStream);

    /// <summary>A whole 200 response: head, then <paramref name="body"/> ending the stream.</summary>
    public async Task RespondAsync(int streamId, string body)
    {
        await SendResponseHeadersAsync(streamId);
        await SendDataAsync(streamId, body, endStream: true);
    }

    /// <summary>
    /// Closes the TCP connection without a GOAWAY: <paramref name="abortive"/> sends a reset (SO_LINGER 0), otherwise our
    /// side is shut down (FIN) and the read loop goes on until the proxy closes its side.
    /// </summary>
    public void CloseTcp(bool abortive)
    {
        if (abortive)
        {
            _socket.LingerState = new LingerOption(true, 0);
            _socket.Close();
        }
        else
        {
            _socket.Shutdown(SocketShutdown.Send);
        }
    }

    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }

        _socket.Dispose(); // the read loop's pending read fails and the loop ends
        await _readLoop.WaitAsync(TimeSpan.FromSeconds(10));
        try
        {
            await Peer.DisposeAsync();
        }
        catch (Exception)
        {
            // The socket is gone already; nothing left to flush.
        }
        _headersLock.Dispose();
    }
}
