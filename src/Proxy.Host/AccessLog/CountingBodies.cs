using System.Buffers;
using System.IO.Pipelines;
using Microsoft.AspNetCore.Http.Features;
using Proxy.Forwarding.Telemetry;

namespace Proxy.Host.AccessLog;

/// <summary>Puts counting wrappers around a request's bodies on the pipeline (the direct path counts with the same pipes).</summary>
// Stateless.
internal static class CountingBodies
{
    /// <summary>Puts counting wrappers around the request's and the response's body, both as pipe and as stream.</summary>
    public static BodyByteCounts Attach(HttpContext context)
    {
        var counts = new BodyByteCounts();
        // The reader first: once Body is replaced, a server may build its reader over the replacement instead.
        var reader = context.Request.BodyReader;
        context.Features.Set<IRequestBodyPipeFeature>(new RequestBodyPipe(new CountingPipeReader(reader, counts)));
        context.Request.Body = new CountingStream(context.Request.Body, counts);
        var response = context.Features.GetRequiredFeature<IHttpResponseBodyFeature>();
        context.Features.Set<IHttpResponseBodyFeature>(new CountingResponseBody(response, counts));
        return counts;
    }

    private sealed class RequestBodyPipe(PipeReader reader) : IRequestBodyPipeFeature
    {
        public PipeReader Reader { get; } = reader;
    }

    /// <summary>Counts what is read from it into In and what is written to it into Out.</summary>
    private sealed class CountingStream(Stream inner, BodyByteCounts counts) : Stream
    {
        public override bool CanRead => inner.CanRead;
        public override bool CanSeek => false;
        public override bool CanWrite => inner.CanWrite;
        public override long Length => throw new NotSupportedException();
        public override long Position { get => throw new NotSupportedException(); set => throw new NotSupportedException(); }

        public override int Read(byte[] buffer, int offset, int count) => Read(buffer.AsSpan(offset, count));

        public override int Read(Span<byte> buffer)
        {
            var read = inner.Read(buffer);
            counts.In += read;
            return read;
        }

        public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
            ReadAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

        public override async ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default)
        {
            var read = await inner.ReadAsync(buffer, cancellationToken).ConfigureAwait(false);
            counts.In += read;
            return read;
        }

        public override void Write(byte[] buffer, int offset, int count) => Write(buffer.AsSpan(offset, count));

        public override void Write(ReadOnlySpan<byte> buffer)
        {
            counts.Out += buffer.Length;
            inner.Write(buffer);
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
            WriteAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

        public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
        {
            counts.Out += buffer.Length;
            return inner.WriteAsync(buffer, cancellationToken);
        }

        public override void Flush() => inner.Flush();

        public override Task FlushAsync(CancellationToken cancellationToken) => inner.FlushAsync(cancellationToken);

        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

        public override void SetLength(long value) => throw new NotSupportedException();
    }

    private sealed class CountingResponseBody(IHttpResponseBodyFeature inner, BodyByteCounts counts) : IHttpResponseBodyFeature
    {
        private Stream? _stream;
        private PipeWriter? _writer;

        public Stream Stream => _stream ??= new CountingStream(inner.Stream, counts);

        public PipeWriter Writer => _writer ??= new CountingPipeWriter(inner.Writer, counts);

        public void DisableBuffering() => inner.DisableBuffering();

        public Task StartAsync(CancellationToken cancellationToken = default) => inner.StartAsync(cancellationToken);

        public Task SendFileAsync(string path, long offset, long? count, CancellationToken cancellationToken = default)
        {
            counts.Out += count ?? Math.Max(0, new FileInfo(path).Length - offset);
            return inner.SendFileAsync(path, offset, count, cancellationToken);
        }

        public Task CompleteAsync() => inner.CompleteAsync();
    }
}
