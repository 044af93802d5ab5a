namespace Proxy.Codecs.Hpack;

// The HPACK seam used by the HTTP/2 engine. HpackDecoder and HpackEncoder live in their own files.

/// <summary>Receives decoded header fields in order. Spans are valid only during the call.</summary>
public interface IHpackHeaderHandler
{
    void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value);
}

/// <summary>A decoding error: the connection must end with COMPRESSION_ERROR (RFC 9113 §4.3).</summary>
public sealed class HpackDecodingException : Exception
{
    public HpackDecodingException(string message) : base(message) { }
}
