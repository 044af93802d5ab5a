using System.Net;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>A request body the test writes to while the response is already being read (bidi streaming).</summary>
public sealed class DuplexContent : HttpContent
{
    private readonly TaskCompletionSource<Stream> _stream = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly TaskCompletionSource _done = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public DuplexContent(string contentType)
    {
        Headers.TryAddWithoutValidation("Content-Type", contentType);
    }

    public Task<Stream> Stream => _stream.Task;

    public async Task WriteAsync(string text)
    {
        var stream = await Stream.WaitAsync(TimeSpan.FromSeconds(10));
        await stream.WriteAsync(System.Text.Encoding.UTF8.GetBytes(text));
        await stream.FlushAsync();
    }

    public void Complete() => _done.TrySetResult();

    protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context)
    {
        // Like a gRPC client: push the request headers out before any message is written.
        // Like a gRPC client: push the request headers out before any message is written.
        await stream.FlushAsync();
        _stream.TrySetResult(stream);
        await _done.Task;
    }

    protected override bool TryComputeLength(out long length)
    {
        length = -1;
        return false;
    }
}
