using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading.Channels;

namespace Proxy.FunctionalTests.Relay;

/// <summary>
/// An HTTP/1.1 backend made of bytes: a <see cref="TcpListener"/> on 127.0.0.1:0 that, on every connection, reads one
/// request head (up to the empty line), writes <see cref="Response"/> exactly as given, and then only watches for the
/// proxy to close the connection (a read that returns 0 or fails with a reset). It never closes a connection itself.
/// </summary>
// Owned by one test (or fixture). The accept loop and the per-connection tasks run on their own; members are thread-safe.
public sealed class RawHttp1Backend : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly CancellationTokenSource _stop = new();
    private readonly Channel<RawBackendConnection> _accepted = Channel.CreateUnbounded<RawBackendConnection>();
    private readonly ConcurrentQueue<Socket> _sockets = new();
    private readonly ConcurrentQueue<Task> _tasks = new();
    private readonly Task _acceptLoop;
    private int _connectionCount;

    public RawHttp1Backend(byte[] response)
    {
        Response = response;
        _listener.Start();
        Address = new Uri($"http://127.0.0.1:{((IPEndPoint)_listener.LocalEndpoint).Port}/");
        _acceptLoop = AcceptLoopAsync();
    }

    public RawHttp1Backend(string response) : this(Encoding.Latin1.GetBytes(response))
    {
    }

    /// <summary>The canned bytes written after each request head.</summary>
    public byte[] Response { get; }

    public Uri Address { get; }

    /// <summary>Connections accepted so far.</summary>
    public int ConnectionCount => Volatile.Read(ref _connectionCount);

    /// <summary>The next connection the backend accepted (in order).</summary>
    public async Task<RawBackendConnection> NextConnectionAsync() => await _accepted.Reader.ReadAsync().AsTask().WaitAsync(RelayProxy.Bound);

    private async Task AcceptLoopAsync()
    {
        while (true)
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

            Interlocked.Increment(ref _connectionCount);
            _sockets.Enqueue(socket);
            var connection = new RawBackendConnection();
            _accepted.Writer.TryWrite(connection);
            _tasks.Enqueue(connection.RunAsync(socket, Response, _stop.Token));
        }
    }

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        _listener.Stop();
        await _acceptLoop;
        foreach (var socket in _sockets)
        {
            socket.Dispose();
        }

        await Task.WhenAll(_tasks).WaitAsync(TimeSpan.FromSeconds(10));
    }
}

/// <summary>What one connection of a <see cref="RawHttp1Backend"/> saw.</summary>
// Written by the connection's task; read by the test after awaiting the tasks below.
public sealed class RawBackendConnection
{
    private readonly TaskCompletionSource<string> _requestHead = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly TaskCompletionSource<string> _closed = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>The request head the proxy sent (Latin-1, up to and including the empty line).</summary>
    public Task<string> RequestHead => _requestHead.Task;

    /// <summary>
    /// Completes when the proxy closed the connection after our response: "FIN" (a read returned 0) or "RST" (the read
    /// failed with a reset). Faults if the connection broke in any other way.
    /// </summary>
    public Task<string> ClosedByProxy => _closed.Task;

    internal async Task RunAsync(Socket socket, byte[] response, CancellationToken stop)
    {
        var buffer = new byte[16 * 1024];
        try
        {
            // The request head: everything up to CRLF CRLF (a GET has no body).
            var head = new List<byte>();
            while (IndexOfEmptyLine(head) < 0)
            {
                var read = await socket.ReceiveAsync(buffer, SocketFlags.None, stop);
                if (read == 0)
                {
                    throw new InvalidOperationException("The proxy closed before it sent a whole request head.");
                }

                head.AddRange(buffer.AsSpan(0, read));
            }

            _requestHead.TrySetResult(Encoding.Latin1.GetString(head.ToArray()));
            await socket.SendAsync(response, SocketFlags.None, stop);

            // Now only the proxy may end it.
            while (true)
            {
                int read;
                try
                {
                    read = await socket.ReceiveAsync(buffer, SocketFlags.None, stop);
                }
                catch (SocketException ex) when (ex.SocketErrorCode == SocketError.ConnectionReset)
                {
                    _closed.TrySetResult("RST");
                    return;
                }

                if (read == 0)
                {
                    _closed.TrySetResult("FIN");
                    return;
                }
            }
        }
        catch (Exception ex)
        {
            _requestHead.TrySetException(ex);
            _closed.TrySetException(ex);
        }
        finally
        {
            socket.Dispose();
        }
    }

    private static int IndexOfEmptyLine(List<byte> bytes)
    {
        for (var i = 3; i < bytes.Count; i++)
        {
            if (bytes[i - 3] == '\r' && bytes[i - 2] == '\n' && bytes[i - 1] == '\r' && bytes[i] == '\n')
            {
                return i;
            }
        }

        return -1;
    }
}
