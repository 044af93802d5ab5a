namespace Proxy.Codecs.Hpack;

/// <summary>HPACK prefixed integers (RFC 7541 §5.1).</summary>
internal static class IntegerCodec
{
    /// <summary>Worst-case encoded size of a non-negative int: the prefix octet plus five continuation octets.</summary>
    public const int MaxEncodedLength = 6;

    /// <summary>
    /// Writes <paramref name="value"/> with an N-bit prefix; <paramref name="firstByteFlags"/> supplies
    /// the representation bits above the prefix. Returns octets written.
    /// </summary>
    public static int Encode(int value, int prefixBits, byte firstByteFlags, Span<byte> destination)
    {
        int prefixMax = (1 << prefixBits) - 1;
        if (value < prefixMax)
        {
            destination[0] = (byte)(firstByteFlags | value);
            return 1;
        }

        destination[0] = (byte)(firstByteFlags | prefixMax);
        uint rest = (uint)(value - prefixMax);
        int written = 1;
        while (rest >= 0x80)
        {
            destination[written++] = (byte)(rest | 0x80);
            rest >>= 7;
        }

        destination[written++] = (byte)rest;
        return written;
    }

    /// <summary>
    /// Reads an N-bit-prefix integer at <paramref name="position"/> (which must be in range) and advances it.
    /// Throws on truncated input and on values above <see cref="int.MaxValue"/>: an integer is a
    /// length or an index here, and RFC 7541 §5.1 leaves the limit to the implementation
    /// ("Integer encodings that exceed implementation limits ... MUST be treated as decoding errors").
    /// </summary>
    public static int Decode(ReadOnlySpan<byte> source, ref int position, int prefixBits)
    {
        int prefixMax = (1 << prefixBits) - 1;
        int value = source[position++] & prefixMax;
        if (value < prefixMax)
        {
            return value;
        }

        long result = prefixMax;
        int shift = 0;
        while (true)
        {
            if (position >= source.Length)
            {
                throw new HpackDecodingException("Truncated integer.");
            }

            byte b = source[position++];
            result += (long)(b & 0x7F) << shift;
            if (result > int.MaxValue)
            {
                throw new HpackDecodingException("Integer overflow.");
            }

            if ((b & 0x80) == 0)
            {
                return (int)result;
            }

            shift += 7;
            if (shift > 28)
            {
                // More continuation octets than any int needs (including zero-padded ones): reject
                // rather than loop over an unbounded run of 0x80 octets.
                throw new HpackDecodingException("Integer overflow.");
            }
        }
    }
}
