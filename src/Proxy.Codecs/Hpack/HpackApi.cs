namespace Proxy.Codecs.Hpack;

// SIGNATURES ONLY (filled in by the HPACK work).

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

/// <summary>
/// HPACK decoder (RFC 7541) with dynamic table and Huffman. Owned by one connection's read loop.
/// Decodes one complete header block at a time (the engine joins HEADERS + CONTINUATION fragments first).
/// </summary>
public sealed partial class HpackDecoder
{
    /// <param name="maxDynamicTableSize">Our SETTINGS_HEADER_TABLE_SIZE: the largest size update the peer may ask for.</param>
    /// <param name="maxStringLength">Longest name or value accepted (a bound against HPACK bombs; exceeding it throws).</param>
    public HpackDecoder(int maxDynamicTableSize = 4096, int maxStringLength = 64 * 1024) => throw new NotImplementedException();

    /// <summary>Decodes a complete header block; throws <see cref="HpackDecodingException"/> on any error.</summary>
    public void Decode(ReadOnlySequence<byte> headerBlock, IHpackHeaderHandler handler) => throw new NotImplementedException();

    /// <summary>Lowers the table limit we advertise (applies once the peer acknowledges our SETTINGS).</summary>
    public void SetMaxDynamicTableSize(int size) => throw new NotImplementedException();
}

/// <summary>
/// HPACK encoder (RFC 7541) with dynamic table and Huffman (used when shorter). Owned by the
/// connection's frame-writer loop: blocks reach the wire in the order they are encoded.
/// </summary>
public sealed partial class HpackEncoder
{
    /// <param name="maxDynamicTableSize">Table size we use; never above the peer's SETTINGS_HEADER_TABLE_SIZE.</param>
    public HpackEncoder(int maxDynamicTableSize = 4096, bool useHuffman = true) => throw new NotImplementedException();

    /// <summary>The peer changed SETTINGS_HEADER_TABLE_SIZE: the next block starts with a size update.</summary>
    public void SetPeerMaxDynamicTableSize(int size) => throw new NotImplementedException();

    /// <summary>Begins a header block: emits any pending dynamic table size update (RFC 7541 §4.2).</summary>
    public void BeginHeaderBlock(IBufferWriter<byte> output) => throw new NotImplementedException();

    /// <summary>
    /// Encodes one field. Names must already be lowercase. <paramref name="neverIndex"/> encodes
    /// as "never indexed" (RFC 7541 §6.2.3) for sensitive values such as authorization and cookies.
    /// </summary>
    public void EncodeHeader(IBufferWriter<byte> output, string name, string value, bool neverIndex = false) => throw new NotImplementedException();
}
