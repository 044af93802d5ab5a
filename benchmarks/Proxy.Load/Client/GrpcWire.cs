using System.Buffers;
using System.Buffers.Binary;
using System.Net;
using Google.Protobuf;

namespace Proxy.Load.Client;

/// <summary>The client side of gRPC over HTTP/2 (PROTOCOL-HTTP2.md), as much as the scenarios need.</summary>
public static class GrpcWire
{
    public const int MessageHeaderSize = 5;

    /// <summary>A Length-Prefixed-Message, built once and sent on every call.</summary>
    public static byte[] Frame(IMessage message)
    {
        var size = message.CalculateSize();
        var bytes = new byte[MessageHeaderSize + size];
        BinaryPrimitives.WriteUInt32BigEndian(bytes.AsSpan(1), (uint)size);
        message.WriteTo(bytes.AsSpan(MessageHeaderSize));
        return bytes;
    }

    public static HttpRequestMessage CreateCall(Uri uri, HttpContent content)
    {
        var request = ConnectionFactory.Request(HttpMethod.Post, uri, HttpVersion.Version20);
        request.Headers.TryAddWithoutValidation("te", "trailers");
        content.Headers.TryAddWithoutValidation("content-type", "application/grpc");
        request.Content = content;
        return request;
    }

    /// <summary>grpc-status from the trailers, or from the headers of a Trailers-Only response; null when absent.</summary>
    public static string? Status(HttpResponseMessage response)
    {
        if (response.TrailingHeaders.NonValidated.TryGetValues("grpc-status", out var values)
            || response.Headers.NonValidated.TryGetValues("grpc-status", out values))
        {
            return values.ToString();
        }

        return null;
    }
}

/// <summary>A request body that is one pre-framed message: nothing built per call but this wrapper.</summary>
public sealed class FramedContent(byte[] frame) : HttpContent
{
    protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
        stream.WriteAsync(frame).AsTask();

    protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken) =>
        stream.WriteAsync(frame, cancellationToken).AsTask();

    protected override bool TryComputeLength(out long length)
    {
        length = frame.Length;
        return true;
    }
}

/// <summary>
/// A request body that stays open: the caller gets the request stream and writes messages when it wants;
/// <see cref="Complete"/> ends it (END_STREAM).
/// </summary>
// Owned by one duplex call.
public sealed class DuplexContent : HttpContent
{
    private readonly TaskCompletionSource<Stream> _stream = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly TaskCompletionSource _done = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public Task<Stream> RequestStream => _stream.Task;

    public void Complete() => _done.TrySetResult();

    protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context)
    {
        _stream.TrySetResult(stream);
        await _done.Task;
    }

    protected override bool TryComputeLength(out long length)
    {
        length = -1;
        return false;
    }

    protected override void Dispose(bool disposing)
    {
        _done.TrySetResult();
        _stream.TrySetCanceled();
        base.Dispose(disposing);
    }
}

/// <summary>
/// Reads Length-Prefixed-Messages from a response stream into one pooled buffer, skipping the payloads
/// (the scenarios count messages and bytes; they do not need the parsed response).
/// </summary>
// Owned by one worker; reused across its calls with Reset.
public sealed class GrpcMessageReader : IDisposable
{
    private byte[] _buffer = ArrayPool<byte>.Shared.Rent(64 * 1024);
    private Stream? _stream;
    private int _start;
    private int _end;

    public void Reset(Stream stream)
    {
        _stream = stream;
        _start = _end = 0;
    }

    /// <summary>The next message's payload length, or -1 at a clean end of the body.</summary>
    public async ValueTask<int> ReadMessageAsync(CancellationToken cancellationToken)
    {
        while (_end - _start < GrpcWire.MessageHeaderSize)
        {
            if (!await ReadMoreAsync(cancellationToken))
            {
                return _end == _start ? -1 : throw new InvalidDataException("The response ended inside a message header.");
            }
        }

        if (_buffer[_start] != 0)
        {
            throw new InvalidDataException("Compressed message received; none was asked for.");
        }

        var length = BinaryPrimitives.ReadInt32BigEndian(_buffer.AsSpan(_start + 1));
        if (length < 0)
        {
            throw new InvalidDataException("Message length over 2 GiB.");
        }

        _start += GrpcWire.MessageHeaderSize;
        var remaining = length;
        while (remaining > 0)
        {
            if (_start == _end && !await ReadMoreAsync(cancellationToken))
            {
                throw new InvalidDataException("The response ended inside a message.");
            }

            var take = Math.Min(remaining, _end - _start);
            _start += take;
            remaining -= take;
        }

        return length;
    }

    private async ValueTask<bool> ReadMoreAsync(CancellationToken cancellationToken)
    {
        if (_start == _end)
        {
            _start = _end = 0;
        }
        else if (_buffer.Length - _end < GrpcWire.MessageHeaderSize)
        {
            // A header straddles the end of the buffer: move the partial bytes to the front.
            _buffer.AsSpan(_start, _end - _start).CopyTo(_buffer);
            _end -= _start;
            _start = 0;
        }

        var read = await _stream!.ReadAsync(_buffer.AsMemory(_end), cancellationToken);
        _end += read;
        return read > 0;
    }

    public void Dispose()
    {
        ArrayPool<byte>.Shared.Return(_buffer);
        _buffer = [];
    }
}
