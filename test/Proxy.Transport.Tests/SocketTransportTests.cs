using System.Buffers;
using System.IO.Pipelines;
using System.Net;
using System.Net.Sockets;
using System.Text;
using Microsoft.AspNetCore.Connections;
using Proxy.Transport.Sockets;

namespace Proxy.Transport.Tests;

/// <summary>The sockets transport on each engine this platform has: the runtime's, and ours (epoll) on Linux.</summary>
public class SocketTransportTests
{
    public static TheoryData<SocketEngine> Engines() =>
        OperatingSystem.IsLinux() ? new TheoryData<SocketEngine> { SocketEngine.Runtime, SocketEngine.Epoll } : new TheoryData<SocketEngine> { SocketEngine.Runtime };

    private static SocketTransportOptions On(SocketEngine engine) => new() { Engine = engine };

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Bind_PortZero_ReportsRealPort(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        var port = ((IPEndPoint)listener.EndPoint).Port;
        Assert.NotEqual(0, port);
        using var client = await Net.ConnectAsync(listener.EndPoint);
        Assert.True(client.Connected);
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Bind_PortInUse_ThrowsAddressInUse(SocketEngine engine)
    {
        await using var first = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        Assert.Throws<AddressInUseException>(() => SocketConnectionListener.Bind((IPEndPoint)first.EndPoint, On(engine)));
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Accept_Echo_BytesRoundTripAndNoDelaySet(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        Assert.NotNull(connection.RemoteEndPoint);
        Assert.Equal(((IPEndPoint)listener.EndPoint).Port, ((IPEndPoint)connection.LocalEndPoint!).Port);

        await client.SendAsync("ping"u8.ToArray());
        var result = await connection.Transport.Input.ReadAtLeastAsync(4).AsTask().WaitAsync(Net.Patience);
        Assert.Equal("ping", Encoding.ASCII.GetString(result.Buffer.Slice(0, 4)));
        connection.Transport.Input.AdvanceTo(result.Buffer.GetPosition(4));

        await connection.Transport.Output.WriteAsync("pong"u8.ToArray());
        using var stream = new NetworkStream(client);
        Assert.Equal("pong", Encoding.ASCII.GetString(await Net.ReadExactlyAsync(stream, 4).WaitAsync(Net.Patience)));
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task PeerClosesSend_InputCompletes(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        client.Shutdown(SocketShutdown.Send);

        var result = await connection.Transport.Input.ReadAsync().AsTask().WaitAsync(Net.Patience);
        Assert.True(result.IsCompleted);
        Assert.True(result.Buffer.IsEmpty);
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task OutputCompleted_PeerSeesEndOfStreamAfterData(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var payload = new byte[300_000];
        Random.Shared.NextBytes(payload);
        await connection.Transport.Output.WriteAsync(payload);
        await connection.Transport.Output.CompleteAsync();

        using var stream = new NetworkStream(client);
        var received = new MemoryStream();
        await stream.CopyToAsync(received).WaitAsync(Net.Patience);
        Assert.Equal(payload, received.ToArray());
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Abort_FailsPendingReadAndClosesPeer(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var closed = new TaskCompletionSource();
        connection.ConnectionClosed.Register(() => closed.TrySetResult());

        var pending = connection.Transport.Input.ReadAsync().AsTask();
        connection.Abort(new ConnectionAbortedException("test"));

        await Assert.ThrowsAnyAsync<Exception>(() => pending.WaitAsync(Net.Patience));
        await closed.Task.WaitAsync(Net.Patience);
        var buffer = new byte[16];
        int read;
        try
        {
            read = await client.ReceiveAsync(buffer).WaitAsync(Net.Patience);
        }
        catch (SocketException)
        {
            read = 0; // Reset is as good as FIN here.
        }
        Assert.Equal(0, read);
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task Unbind_PendingAcceptReturnsNull(SocketEngine engine)
    {
        var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        var accept = listener.AcceptAsync().AsTask();
        await listener.UnbindAsync();
        Assert.Null(await accept.WaitAsync(Net.Patience));
        await listener.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task BothDirectionsAtOnce_MoreThanTheKernelBuffers_ArriveIntact(SocketEngine engine)
    {
        // 32 MB each way: more than the kernel's socket buffers and the pipes together, so sends find the socket full
        // (EAGAIN, short sends) and wait for it to drain, while receives run on the same connection.
        const int Size = 32 * 1024 * 1024;
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var down = new byte[Size];
        var up = new byte[Size];
        Random.Shared.NextBytes(down);
        Random.Shared.NextBytes(up);

        var serverWrites = Task.Run(async () =>
        {
            // Uneven writes, so the output pipe holds several segments per send (gather).
            for (var offset = 0; offset < Size;)
            {
                var length = Math.Min(Size - offset, 3000 + (offset % 70_000));
                await connection.Transport.Output.WriteAsync(down.AsMemory(offset, length));
                offset += length;
            }
        });
        var serverReads = Task.Run(async () =>
        {
            var received = new MemoryStream(Size);
            while (true)
            {
                var result = await connection.Transport.Input.ReadAsync();
                foreach (var segment in result.Buffer)
                {
                    received.Write(segment.Span);
                }
                connection.Transport.Input.AdvanceTo(result.Buffer.End);
                if (received.Length >= Size || result.IsCompleted)
                {
                    return received.ToArray();
                }
            }
        });
        using var stream = new NetworkStream(client);
        var clientWrites = stream.WriteAsync(up).AsTask();
        var clientReads = Net.ReadExactlyAsync(stream, Size);

        await Task.WhenAll(serverWrites, clientWrites).WaitAsync(Net.Patience);
        Assert.Equal(down, await clientReads.WaitAsync(Net.Patience));
        Assert.Equal(up, await serverReads.WaitAsync(Net.Patience));
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task ManyConnections_InTwoWaves_EachEchoesItsOwnBytes(SocketEngine engine)
    {
        // 200 at once (the epoll engine's table starts at 64 and grows), then 200 more in the slots the first freed.
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        for (var wave = 0; wave < 2; wave++)
        {
            var clients = new List<Socket>();
            var connections = new List<ConnectionContext>();
            for (var i = 0; i < 200; i++)
            {
                clients.Add(await Net.ConnectAsync(listener.EndPoint));
                connections.Add((await listener.AcceptAsync())!);
            }
            var echoes = connections.Select(c => Task.Run(async () =>
            {
                var result = await c.Transport.Input.ReadAtLeastAsync(8);
                var bytes = result.Buffer.Slice(0, 8).ToArray();
                c.Transport.Input.AdvanceTo(result.Buffer.GetPosition(8));
                await c.Transport.Output.WriteAsync(bytes);
            })).ToList();
            var checks = clients.Select((client, i) => Task.Run(async () =>
            {
                var message = BitConverter.GetBytes((long)(wave * 1000 + i));
                await client.SendAsync(message);
                using var stream = new NetworkStream(client, ownsSocket: false);
                Assert.Equal(message, await Net.ReadExactlyAsync(stream, 8));
            })).ToList();
            await Task.WhenAll(echoes.Concat(checks)).WaitAsync(Net.Patience);
            foreach (var c in connections)
            {
                await c.DisposeAsync();
            }
            foreach (var client in clients)
            {
                client.Dispose();
            }
        }
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task PeerResets_PendingReadFailsWithConnectionReset(SocketEngine engine)
    {
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var pending = connection.Transport.Input.ReadAsync().AsTask();
        client.LingerState = new LingerOption(true, 0); // close sends RST
        client.Dispose();

        await Assert.ThrowsAsync<ConnectionResetException>(() => pending.WaitAsync(Net.Patience));
        await connection.DisposeAsync();
    }

    [Theory]
    [MemberData(nameof(Engines))]
    public async Task PeerSendsThenClosesAtOnce_DataThenInputCompletes(SocketEngine engine)
    {
        // Data and FIN often arrive together: the receive that returns the data takes the FIN too, and only the next
        // one returns 0. The epoll engine must read again rather than wait for an event that will not come.
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), On(engine));
        for (var round = 0; round < 20; round++)
        {
            using var client = await Net.ConnectAsync(listener.EndPoint);
            var connection = (await listener.AcceptAsync())!;
            await client.SendAsync("last words"u8.ToArray());
            client.Shutdown(SocketShutdown.Send);

            var received = new MemoryStream();
            while (true)
            {
                var result = await connection.Transport.Input.ReadAsync().AsTask().WaitAsync(Net.Patience);
                foreach (var segment in result.Buffer)
                {
                    received.Write(segment.Span);
                }
                connection.Transport.Input.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }
            }
            Assert.Equal("last words", Encoding.ASCII.GetString(received.ToArray()));
            await connection.DisposeAsync();
        }
    }
}

/// <summary>Sockets:EpollThreads: the process's one epoll engine, and the values a listener may ask it for.</summary>
public class EpollThreadsTests
{
    [Fact]
    public async Task Bind_EpollThreadsOfTheRunningEngine_Serves_OtherCountThrowsNamingTheKey()
    {
        if (!OperatingSystem.IsLinux())
        {
            Assert.Throws<PlatformNotSupportedException>(() =>
                SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), new SocketTransportOptions { Engine = SocketEngine.Epoll, EpollThreads = 1 }));
            return;
        }

        // Whatever started the process's engine (this test or another) chose its threads: the same count is accepted.
        var running = Proxy.Transport.Sockets.Epoll.EpollEngine.GetShared()!.ThreadCount;
        await using (var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0),
            new SocketTransportOptions { Engine = SocketEngine.Epoll, EpollThreads = running }))
        {
            using var client = await Net.ConnectAsync(listener.EndPoint);
            var connection = (await listener.AcceptAsync())!;
            await client.SendAsync("ping"u8.ToArray());
            var read = await connection.Transport.Input.ReadAtLeastAsync(4).AsTask().WaitAsync(Net.Patience);
            Assert.Equal("ping", Encoding.ASCII.GetString(read.Buffer.Slice(0, 4)));
            connection.Transport.Input.AdvanceTo(read.Buffer.GetPosition(4));
            await connection.DisposeAsync();
        }

        var other = Assert.Throws<InvalidOperationException>(() => SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0),
            new SocketTransportOptions { Engine = SocketEngine.Epoll, EpollThreads = running + 1 }));
        Assert.Contains($"Sockets:EpollThreads is {running + 1}, but this process's epoll engine already runs {running} threads", other.Message);

        var negative = Assert.Throws<ArgumentOutOfRangeException>(() => SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0),
            new SocketTransportOptions { Engine = SocketEngine.Epoll, EpollThreads = -1 }));
        Assert.Contains("Sockets:EpollThreads is -1", negative.Message);
    }
}

/// <summary>EventLoop: work deferred on an epoll thread runs on that thread after its batch; elsewhere nothing is deferred.</summary>
public class EventLoopTests
{
    [Fact]
    public void TryDefer_OffAnEpollThread_QueuesNothing()
    {
        var ran = false;
        Assert.False(EventLoop.IsCurrentThread);
        Assert.Equal(-1, EventLoop.CurrentIndex);
        Assert.False(EventLoop.TryDefer(_ => ran = true, null));
        Assert.False(ran);
    }

    [Fact]
    public async Task TryDefer_InAReadContinuation_RunsOnTheSameEpollThreadAfterTheContinuationReturns()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // no epoll engine: TryDefer_OffAnEpollThread_QueuesNothing covers the rest
        }

        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0),
            new SocketTransportOptions { Engine = SocketEngine.Epoll, InlineScheduling = true });
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var steps = new System.Collections.Concurrent.ConcurrentQueue<string>();
        var deferredRan = new TaskCompletionSource<(int Thread, string? Name, bool OnLoop)>(TaskCreationOptions.RunContinuationsAsynchronously);

        // Nothing was sent yet, so the read waits; it completes on the epoll thread that receives the byte (inline
        // scheduling), and the continuation defers from there.
        var pending = connection.Transport.Input.ReadAsync();
        Assert.False(pending.IsCompleted);
        var reader = ContinueAsync(pending);
        await client.SendAsync("x"u8.ToArray());

        var (onLoop, deferred, continuationThread) = await reader.WaitAsync(Net.Patience);
        Assert.True(onLoop, "the read continuation did not run on an epoll thread");
        Assert.True(deferred);
        var ran = await deferredRan.Task.WaitAsync(Net.Patience);
        Assert.Equal(continuationThread, ran.Thread);
        Assert.True(ran.OnLoop);
        Assert.StartsWith("Proxy epoll", ran.Name);
        Assert.Equal(["continuation", "deferred"], steps.ToArray());
        await connection.DisposeAsync();

        async Task<(bool OnLoop, bool Deferred, int Thread)> ContinueAsync(ValueTask<System.IO.Pipelines.ReadResult> read)
        {
            var result = await read.ConfigureAwait(false);
            connection.Transport.Input.AdvanceTo(result.Buffer.End);
            var onLoop = EventLoop.IsCurrentThread;
            var deferred = EventLoop.TryDefer(_ =>
            {
                steps.Enqueue("deferred");
                deferredRan.TrySetResult((Environment.CurrentManagedThreadId, Thread.CurrentThread.Name, EventLoop.IsCurrentThread));
            }, null);
            steps.Enqueue("continuation");
            return (onLoop, deferred, Environment.CurrentManagedThreadId);
        }
    }

    [Fact]
    public async Task Flush_OnAnEpollThread_SendsAfterTheBatch_AndOffTheLoopAtOnce()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // no epoll engine: a flush sends on the flushing thread (SocketTransportTests)
        }

        var io = new SentCounter();
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0),
            new SocketTransportOptions { Engine = SocketEngine.Epoll, InlineScheduling = true }, io);
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (await listener.AcceptAsync())!;
        var afterBatch = new TaskCompletionSource<long>(TaskCreationOptions.RunContinuationsAsynchronously);

        // The read completes on the epoll thread that receives the byte; the continuation writes and flushes there.
        var pending = connection.Transport.Input.ReadAsync();
        Assert.False(pending.IsCompleted);
        var reply = ReplyOnTheLoopAsync(pending);
        await client.SendAsync("x"u8.ToArray());

        var (onLoop, flushCompleted, sentAtFlush) = await reply.WaitAsync(Net.Patience);
        Assert.True(onLoop, "the read continuation did not run on an epoll thread");
        Assert.True(flushCompleted, "a flush under the pause threshold completes at once");
        Assert.Equal(0, sentAtFlush); // the send waits for the end of the batch...
        Assert.Equal(3, await afterBatch.Task.WaitAsync(Net.Patience)); // ...and has run when work deferred after it runs
        Assert.Equal("abc", await ReceiveAsync(client, 3));

        // Off the loop (this test's thread) the flush sends before it returns.
        connection.Transport.Output.Write("defg"u8);
        var flush = connection.Transport.Output.FlushAsync();
        Assert.True(flush.IsCompleted);
        Assert.Equal(7, io.SentBytes);
        Assert.Equal("defg", await ReceiveAsync(client, 4));
        await connection.DisposeAsync();

        async Task<(bool OnLoop, bool FlushCompleted, long SentAtFlush)> ReplyOnTheLoopAsync(ValueTask<System.IO.Pipelines.ReadResult> read)
        {
            var result = await read.ConfigureAwait(false);
            connection.Transport.Input.AdvanceTo(result.Buffer.End);
            var output = connection.Transport.Output;
            output.Write("abc"u8);
            var flushed = output.FlushAsync();
            var sent = io.SentBytes;
            // Deferred after the flush, so it runs after the send it scheduled.
            EventLoop.TryDefer(_ => afterBatch.TrySetResult(io.SentBytes), null);
            return (EventLoop.IsCurrentThread, flushed.IsCompleted, sent);
        }

        static async Task<string> ReceiveAsync(Socket socket, int count)
        {
            var buffer = new byte[count];
            var got = 0;
            while (got < count)
            {
                var n = await socket.ReceiveAsync(buffer.AsMemory(got), SocketFlags.None).AsTask().WaitAsync(Net.Patience);
                Assert.NotEqual(0, n);
                got += n;
            }
            return System.Text.Encoding.ASCII.GetString(buffer);
        }
    }

    private sealed class SentCounter : ISocketIoMetrics
    {
        private long _sent;
        public long SentBytes => Interlocked.Read(ref _sent);
        public void Received(int bytes) { }
        public void Sent(long bytes) => Interlocked.Add(ref _sent, bytes);
    }

    /// <summary>
    /// A raw connected pair whose accepted side already holds <paramref name="queued"/> bytes from the peer (and its FIN
    /// when <paramref name="thenFinish"/>), wrapped in an epoll SocketConnection that is not started yet.
    /// </summary>
    private static async Task<(Socket Peer, SocketConnection Connection, byte[] Sent)> QueuedBeforeStartAsync(int queued, bool thenFinish)
    {
        using var listen = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        // Room for every byte before anything reads (the accepted socket inherits it, and its window is sized from it).
        listen.ReceiveBufferSize = 1024 * 1024;
        listen.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listen.Listen();
        var peer = await Net.ConnectAsync(listen.LocalEndPoint!);
        var accepted = await listen.AcceptAsync();
        var sent = new byte[queued];
        new Random(queued).NextBytes(sent);
        await peer.SendAsync(sent);
        if (thenFinish)
        {
            peer.Shutdown(SocketShutdown.Send);
        }
        // Every byte is in the accepted socket's queue before anything reads it. Over loopback they usually are once the
        // send returned; under load the kernel may finish delivering them a moment later, so wait for the condition.
        Assert.True(SpinWait.SpinUntil(() => accepted.Available >= queued, Net.Patience),
            $"only {accepted.Available} of {queued} bytes arrived");

        var options = new SocketTransportOptions { Engine = SocketEngine.Epoll, InlineScheduling = true };
        var epoll = Proxy.Transport.Sockets.Epoll.EpollSocket.Attach(accepted, SocketConnectionListener.EngineFor(options)!);
        return (peer, new SocketConnection(accepted, options, epoll: epoll), sent);
    }

    /// <summary>
    /// Starts <paramref name="connection"/> with a read already waiting, and returns (and consumes) what the receive loop's
    /// first flush gave it. ConfigureAwait(false): with inline scheduling the continuation runs inside that flush, so it
    /// sees nothing a later receive added.
    /// </summary>
    private static Task<byte[]> FirstFlushAsync(SocketConnection connection)
    {
        var input = connection.Transport.Input;
        var captured = CaptureAsync(input); // its continuation is registered before the loop starts (Start runs it at once)
        connection.Start();
        return captured;

        static async Task<byte[]> CaptureAsync(PipeReader input)
        {
            var first = await input.ReadAsync().ConfigureAwait(false);
            var bytes = first.Buffer.ToArray();
            input.AdvanceTo(first.Buffer.End);
            return bytes;
        }
    }

    [Fact]
    public async Task Receive_ManyBytesWaiting_ReachTheProtocolInOneBatch()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // no epoll engine
        }

        var (peer, connection, sent) = await QueuedBeforeStartAsync(80 * 1024, thenFinish: false);
        using (peer)
        {
            var input = connection.Transport.Input;
            var first = await FirstFlushAsync(connection).WaitAsync(Net.Patience);
            // A receive of one block (16 KiB) at a time would flush 16 KiB.
            Assert.InRange(first.Length, SocketConnection.MaxReceiveBatch, sent.Length);

            var received = new MemoryStream();
            received.Write(first);
            while (received.Length < sent.Length)
            {
                var result = await input.ReadAsync().AsTask().WaitAsync(Net.Patience);
                foreach (var segment in result.Buffer)
                {
                    received.Write(segment.Span);
                }
                input.AdvanceTo(result.Buffer.End);
            }
            Assert.Equal(sent, received.ToArray());
            await connection.DisposeAsync();
        }
    }

    [Fact]
    public async Task Receive_BatchEndingInFin_DataReachesTheProtocolThenInputCompletes()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // no epoll engine
        }

        var (peer, connection, sent) = await QueuedBeforeStartAsync(40 * 1024, thenFinish: true);
        using (peer)
        {
            var input = connection.Transport.Input;
            var first = await FirstFlushAsync(connection).WaitAsync(Net.Patience);
            Assert.Equal(sent, first); // the whole batch, FIN met within it

            var last = await input.ReadAsync().AsTask().WaitAsync(Net.Patience);
            Assert.True(last.IsCompleted);
            Assert.True(last.Buffer.IsEmpty);
            input.AdvanceTo(last.Buffer.End);
            await connection.DisposeAsync();
        }
    }

    [Fact]
    public async Task BackendConnect_FromAnEpollThread_JoinsThatThread()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // no epoll engine
        }

        var options = new SocketTransportOptions { Engine = SocketEngine.Epoll, InlineScheduling = true };
        await using var listener = SocketConnectionListener.Bind(new IPEndPoint(IPAddress.Loopback, 0), options);
        using var client = await Net.ConnectAsync(listener.EndPoint);
        var connection = (SocketConnection)(await listener.AcceptAsync())!;
        var port = ((IPEndPoint)listener.EndPoint).Port;

        // Off an epoll thread: one of the engine's threads, in turn.
        await using (var fromTestThread = await Proxy.Transport.Client.BackendConnector.ConnectAsync("127.0.0.1", port, null, Net.Patience, options))
        {
            Assert.InRange(fromTestThread.Loop, 0, Proxy.Transport.Sockets.Epoll.EpollEngine.GetShared()!.ThreadCount - 1);
        }

        // On an epoll thread (a read continuation, as a request's handler runs): the new connection is served by that thread.
        var pending = connection.Transport.Input.ReadAsync();
        var connected = ConnectFromTheLoopAsync(pending);
        await client.SendAsync("x"u8.ToArray());
        var (loop, transports) = await connected.WaitAsync(Net.Patience);
        Assert.True(loop >= 0, "the read continuation did not run on an epoll thread");
        foreach (var transport in transports)
        {
            Assert.Equal(loop, transport.Loop); // three in a row: taking turns would have spread them
            await transport.DisposeAsync();
        }
        await connection.DisposeAsync();

        async Task<(int Loop, List<Proxy.Transport.Client.BackendTransport> Transports)> ConnectFromTheLoopAsync(ValueTask<System.IO.Pipelines.ReadResult> read)
        {
            var result = await read.ConfigureAwait(false);
            connection.Transport.Input.AdvanceTo(result.Buffer.End);
            var loop = EventLoop.CurrentIndex;
            var transports = new List<Proxy.Transport.Client.BackendTransport>();
            for (var i = 0; i < 3; i++)
            {
                // A connect's continuation runs on the thread serving the new socket: the same one, when it joined it.
                transports.Add(await Proxy.Transport.Client.BackendConnector.ConnectAsync("127.0.0.1", port, null, Net.Patience, options).ConfigureAwait(false));
            }
            return (loop, transports);
        }
    }
}
