using System.IO.Pipelines;
using Proxy.Transport.Tls;

namespace Proxy.Transport.Tests;

public class CoalescingOutputPumpTests
{
    [Fact]
    public async Task RunAsync_ManySmallSegments_CoalescedIntoMaxSizedWrites()
    {
        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: 0)); // No backpressure: everything pending at once.
        var sink = new MemoryStream();
        var counting = new CountingStream(sink);
        for (var i = 0; i < 256; i++)
        {
            var span = pipe.Writer.GetSpan(4096)[..4096];
            span.Fill((byte)i);
            pipe.Writer.Advance(4096);
        }
        await pipe.Writer.FlushAsync();
        await pipe.Writer.CompleteAsync();

        await CoalescingOutputPump.RunAsync(pipe.Reader, counting, maxWriteSize: 64 * 1024).WaitAsync(Net.Patience);

        Assert.Equal(Enumerable.Repeat(64 * 1024, 16), counting.Writes);
        var bytes = sink.ToArray();
        Assert.Equal(1024 * 1024, bytes.Length);
        Assert.Equal(17, bytes[17 * 4096]); // Order preserved across the copies.
    }

    [Fact]
    public async Task RunAsync_SmallFlush_WrittenAtOnceNotHeldBack()
    {
        var pipe = new Pipe();
        var sink = new CountingStream(new MemoryStream());
        var pump = CoalescingOutputPump.RunAsync(pipe.Reader, sink, 64 * 1024);

        await pipe.Writer.WriteAsync(new byte[100]); // An SSE event: must leave now, not wait for 64 KiB.
        while (sink.Writes.Count == 0)
        {
            await Task.Yield();
        }
        Assert.Equal([100], sink.Writes);
        await pipe.Writer.CompleteAsync();
        await pump.WaitAsync(Net.Patience);
    }

    [Fact]
    public async Task RunAsync_StreamFails_WriterSeesCompletion()
    {
        var pipe = new Pipe();
        var pump = CoalescingOutputPump.RunAsync(pipe.Reader, new FailingStream(), 64 * 1024);
        await pipe.Writer.WriteAsync(new byte[10]);
        await pump.WaitAsync(Net.Patience);

        // The reader completed with the error: further writes observe it.
        await Assert.ThrowsAsync<IOException>(async () => await pipe.Writer.WriteAsync(new byte[10]));
    }

    private sealed class FailingStream : MemoryStream
    {
        public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
            => ValueTask.FromException(new IOException("broken"));
    }
}
