using System.Net;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>
/// Sits between Grpc.Net.Client and its SocketsHttpHandler and counts the body bytes of each call as they cross the
/// wire (after gRPC compression, before HTTP), with the grpc-encoding of each direction: what proves that a call was
/// really compressed rather than only labelled so.
/// </summary>
// Written by the channel's calls, read by the test after they completed; one call at a time.
public sealed class WireRecorder : DelegatingHandler
{
    private long _requestBytes;
    private long _responseBytes;

    /// <summary>Request body bytes of the last call, counted as the handler sent them.</summary>
    public long RequestBytes => Interlocked.Read(ref _requestBytes);

    /// <summary>Response body bytes of the last call, counted as the client read them.</summary>
    public long ResponseBytes => Interlocked.Read(ref _responseBytes);

    public string? RequestEncoding { get; private set; }

    public string? ResponseEncoding { get; private set; }

    protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken cancellationToken)
    {
        Interlocked.Exchange(ref _requestBytes, 0);
        Interlocked.Exchange(ref _responseBytes, 0);
        RequestEncoding = request.Headers.TryGetValues("grpc-encoding", out var sent) ? string.Join(",", sent) : null;
        if (request.Content is { } content)
        {
            request.Content = new CountingContent(content, n => Interlocked.Add(ref _requestBytes, n));
        }

        var response = await base.SendAsync(request, cancellationToken);
        ResponseEncoding = response.Headers.TryGetValues("grpc-encoding", out var received) ? string.Join(",", received) : null;
        response.Content = new CountingContent(response.Content, n => Interlocked.Add(ref _responseBytes, n));
        return response;
    }

    /// <summary>The same content, its bytes counted whichever way they are taken (pushed to a stream or read).</summary>
    private sealed class CountingContent : HttpContent
    {
        private readonly HttpContent _inner;
        private readonly Action<int> _count;

        public CountingContent(HttpContent inner, Action<int> count)
        {
            _inner = inner;
            _count = count;
            foreach (var header in inner.Headers)
            {
                Headers.TryAddWithoutValidation(header.Key, header.Value);
            }
        }

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
            SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken) =>
            _inner.CopyToAsync(new CountingStream(stream, _count), context, cancellationToken);

        protected override async Task<Stream> CreateContentReadStreamAsync(CancellationToken cancellationToken) =>
            new CountingStream(await _inner.ReadAsStreamAsync(cancellationToken), _count);

        protected override Task<Stream> CreateContentReadStreamAsync() => CreateContentReadStreamAsync(CancellationToken.None);

        protected override bool TryComputeLength(out long length)
        {
            length = 0;
            return false;
        }

        protected override void Dispose(bool disposing)
        {
            if (disposing)
            {
                _inner.Dispose();
            }

            base.Dispose(disposing);
        }
    }

    /// <summary>Passes reads and writes through to <c>inner</c>, counting the bytes.</summary>
    private sealed class CountingStream(Stream inner, Action<int> count) : Stream
    {
        public override bool CanRead => inner.CanRead;
        public override bool CanSeek => false;
        public override bool CanWrite => inner.CanWrite;
        public override long Length => throw new NotSupportedException();
        public override long Position { get => throw new NotSupportedException(); set => throw new NotSupportedException(); }

        public override int Read(byte[] buffer, int offset, int length) => Counted(inner.Read(buffer, offset, length));

        public override async ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default) =>
            Counted(await inner.ReadAsync(buffer, cancellationToken));

        public override Task<int> ReadAsync(byte[] buffer, int offset, int length, CancellationToken cancellationToken) =>
            ReadAsync(buffer.AsMemory(offset, length), cancellationToken).AsTask();

        public override void Write(byte[] buffer, int offset, int length)
        {
            count(length);
            inner.Write(buffer, offset, length);
        }

        public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken cancellationToken = default)
        {
            count(buffer.Length);
            return inner.WriteAsync(buffer, cancellationToken);
        }

        public override Task WriteAsync(byte[] buffer, int offset, int length, CancellationToken cancellationToken) =>
            WriteAsync(buffer.AsMemory(offset, length), cancellationToken).AsTask();

        public override void Flush() => inner.Flush();

        public override Task FlushAsync(CancellationToken cancellationToken) => inner.FlushAsync(cancellationToken);

        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

        public override void SetLength(long value) => throw new NotSupportedException();

        protected override void Dispose(bool disposing)
        {
            if (disposing)
            {
                inner.Dispose();
            }

            base.Dispose(disposing);
        }

        private int Counted(int read)
        {
            count(read);
            return read;
        }
    }
}
