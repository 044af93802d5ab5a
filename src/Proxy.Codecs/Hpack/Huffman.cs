using System.Numerics;

namespace Proxy.Codecs.Hpack;

/// <summary>
/// The HPACK static Huffman code (RFC 7541 §5.2, Appendix B).
/// </summary>
/// <remarks>
/// NOTE: the Appendix B code is canonical (codes of one length are consecutive and ordered by
/// symbol, and each length continues where the previous one ended), so only the code lengths
/// are typed here; the codes are derived at start-up and checked against Appendix B in tests.
/// Decoding is canonical too: an 8-bit lookup table for the codes of 5..8 bits (the common
/// ones), then a per-length range compare for the longer codes.
/// </remarks>
internal static class Huffman
{
    public const int Eos = 256;

    // Code length in bits of each symbol 0..255 and EOS (256), from RFC 7541 Appendix B.
    private static ReadOnlySpan<byte> Lengths =>
    [
        13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //   0..15
        28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //  16..31
        6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,         //  32..47  ' '..'/'
        5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,              //  48..63  '0'..'?'
        13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,                //  64..79  '@'..'O'
        7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,             //  80..95  'P'..'_'
        15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,                //  96..111 '`'..'o'
        6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,            // 112..127 'p'..DEL
        20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128..143
        24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144..159
        22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160..175
        21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176..191
        26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192..207
        19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208..223
        20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224..239
        26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240..255
        30,                                                             // EOS
    ];

    private const int MaxLength = 30;
    private const int FastBits = 8;

    // Right-aligned code of each symbol (encoder).
    private static readonly uint[] s_codes = new uint[257];

    // Decoder tables.
    // s_fast[top 8 bits] = symbol | (length << 9) for codes of at most 8 bits, else 0.
    private static readonly ushort[] s_fast = new ushort[1 << FastBits];
    // s_limit[L] = first left-aligned 32-bit window value that needs more than L bits.
    private static readonly ulong[] s_limit = new ulong[MaxLength + 1];
    private static readonly uint[] s_firstCode = new uint[MaxLength + 1];
    private static readonly int[] s_firstSymbolSlot = new int[MaxLength + 1];
    private static readonly ushort[] s_symbolsByCode = new ushort[257];

    static Huffman()
    {
        ReadOnlySpan<byte> lengths = Lengths;
        Span<int> countPerLength = stackalloc int[MaxLength + 1];
        foreach (byte length in lengths)
        {
            countPerLength[length]++;
        }

        // Canonical assignment: codes of length L start at (first code of L-1 + count of L-1) << 1.
        uint code = 0;
        int slot = 0;
        Span<uint> nextCode = stackalloc uint[MaxLength + 1];
        for (int length = 1; length <= MaxLength; length++)
        {
            s_firstCode[length] = code;
            s_firstSymbolSlot[length] = slot;
            nextCode[length] = code;
            s_limit[length] = (ulong)(code + (uint)countPerLength[length]) << (32 - length);
            slot += countPerLength[length];
            code = (code + (uint)countPerLength[length]) << 1;
        }

        for (int length = 1; length <= MaxLength; length++)
        {
            for (int symbol = 0; symbol < lengths.Length; symbol++)
            {
                if (lengths[symbol] != length)
                {
                    continue;
                }

                uint symbolCode = nextCode[length]++;
                s_codes[symbol] = symbolCode;
                s_symbolsByCode[s_firstSymbolSlot[length] + (int)(symbolCode - s_firstCode[length])] = (ushort)symbol;
                if (length <= FastBits)
                {
                    int first = (int)(symbolCode << (FastBits - length));
                    int span = 1 << (FastBits - length);
                    for (int i = 0; i < span; i++)
                    {
                        s_fast[first + i] = (ushort)(symbol | (length << 9));
                    }
                }
            }
        }
    }

    /// <summary>The code of a symbol, right-aligned (for tests against Appendix B).</summary>
    internal static uint GetCode(int symbol) => s_codes[symbol];

    internal static int GetCodeLength(int symbol) => Lengths[symbol];

    /// <summary>Length in octets of the Huffman encoding of <paramref name="source"/> (chars must be at most 0xFF).</summary>
    public static int GetEncodedLength(ReadOnlySpan<char> source) => GetEncodedLengthCore(source);

    public static int GetEncodedLength(ReadOnlySpan<byte> source) => GetEncodedLengthCore(source);

    /// <summary>Encodes chars (each at most 0xFF, one octet) into <paramref name="destination"/>; returns octets written.</summary>
    public static int Encode(ReadOnlySpan<char> source, Span<byte> destination) => EncodeCore(source, destination);

    public static int Encode(ReadOnlySpan<byte> source, Span<byte> destination) => EncodeCore(source, destination);

    // NOTE: one body for chars (header strings, one octet each) and bytes; the JIT specialises the
    // generic per value type, so the char path costs the same as a hand-written copy.
    private static int GetEncodedLengthCore<T>(ReadOnlySpan<T> source)
        where T : struct, IBinaryInteger<T>
    {
        ReadOnlySpan<byte> lengths = Lengths;
        long bits = 0;
        foreach (T symbol in source)
        {
            bits += lengths[byte.CreateTruncating(symbol)];
        }

        return (int)((bits + 7) >> 3);
    }

    private static int EncodeCore<T>(ReadOnlySpan<T> source, Span<byte> destination)
        where T : struct, IBinaryInteger<T>
    {
        ReadOnlySpan<byte> lengths = Lengths;
        uint[] codes = s_codes;
        ulong pending = 0; // right-aligned: the low `bits` bits are not yet written
        int bits = 0;
        int written = 0;
        foreach (T value in source)
        {
            int symbol = byte.CreateTruncating(value);
            int length = lengths[symbol];
            pending = (pending << length) | codes[symbol];
            bits += length;
            while (bits >= 8)
            {
                bits -= 8;
                destination[written++] = (byte)(pending >> bits);
            }
        }

        if (bits > 0)
        {
            // RFC 7541 §5.2: pad with the most significant bits of EOS (all ones).
            destination[written++] = (byte)((pending << (8 - bits)) | (0xFFu >> bits));
        }

        return written;
    }

    /// <summary>
    /// Decodes a Huffman string into <paramref name="destination"/> and returns the octets written.
    /// Throws <see cref="HpackDecodingException"/> on EOS, bad padding, or when the output does not fit.
    /// </summary>
    public static int Decode(ReadOnlySpan<byte> source, Span<byte> destination)
    {
        ulong bitBuffer = 0; // left-aligned: the top `bits` bits are unread input
        int bits = 0;
        int read = 0;
        int written = 0;
        while (true)
        {
            while (bits <= 56 && read < source.Length)
            {
                bitBuffer |= (ulong)source[read++] << (56 - bits);
                bits += 8;
            }

            if (bits == 0)
            {
                return written;
            }

            // Past the end of input the window is filled with ones, the EOS prefix: a trailing
            // partial code then looks like a code longer than the bits left (checked below).
            ulong padded = bits >= 32 ? bitBuffer : bitBuffer | (ulong.MaxValue >> bits);
            uint window = (uint)(padded >> 32);

            int symbol;
            int length;
            ushort fast = s_fast[window >> (32 - FastBits)];
            if (fast != 0)
            {
                symbol = fast & 0x1FF;
                length = fast >> 9;
            }
            else
            {
                length = FastBits + 1;
                while (window >= s_limit[length])
                {
                    length++;
                }

                symbol = s_symbolsByCode[s_firstSymbolSlot[length] + (int)((window >> (32 - length)) - s_firstCode[length])];
            }

            if (length > bits)
            {
                // Only at the end of input: what is left must be padding.
                // RFC 7541 §5.2: "A padding strictly longer than 7 bits MUST be treated as a decoding
                // error. A padding not corresponding to the most significant bits of the code for the
                // EOS symbol MUST be treated as a decoding error."
                if (bits > 7)
                {
                    throw new HpackDecodingException("Huffman padding longer than 7 bits.");
                }

                ulong mask = ulong.MaxValue << (64 - bits);
                if ((bitBuffer & mask) != mask)
                {
                    throw new HpackDecodingException("Huffman padding is not a prefix of EOS.");
                }

                return written;
            }

            if (symbol == Eos)
            {
                // RFC 7541 §5.2: "A Huffman-encoded string literal containing the EOS symbol MUST be
                // treated as a decoding error."
                throw new HpackDecodingException("Huffman string contains EOS.");
            }

            if (written == destination.Length)
            {
                throw new HpackDecodingException("Decoded string exceeds the maximum length.");
            }

            destination[written++] = (byte)symbol;
            bitBuffer <<= length;
            bits -= length;
        }
    }
}
