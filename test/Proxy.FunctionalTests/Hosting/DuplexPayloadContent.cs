using System.Net;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// A request body written in chunks that HttpClient treats as duplex: over HTTP/2 SendAsync returns when
/// the response headers arrive while this is still being sent.
/// </summary>
/// <remarks>
/// NOTE: ByteArrayContent and StreamContent are not duplex in SocketsHttpHandler: it finishes sending them
/// before handing back the response, so an echo bigger than the flow-control windows would deadlock
/// (server blocked on our unread response, we blocked on its unread request). A plain HttpContent is duplex.
/// </remarks>
public sealed class DuplexPayloadContent(ReadOnlyMemory<byte> payload, int chunkSize = 64 * 1024) : HttpContent
{
    protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context)
    {
        for (var offset = 0; offset < payload.Length; offset += chunkSize)
        {
            await stream.WriteAsync(payload.Slice(offset, Math.Min(chunkSize, payload.Length - offset)));
        }
    }

    protected override bool TryComputeLength(out long length)
    {
        length = payload.Length;
        return true;
    }
}
