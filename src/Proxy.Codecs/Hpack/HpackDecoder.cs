namespace Proxy.Codecs.Hpack;

// Owned by the connection's read loop: one decoder per connection, one header block at a time.
public sealed partial class HpackDecoder
{
    private readonly int _maxStringLength;
    private readonly DecoderDynamicTable _table;

    // Our advertised SETTINGS_HEADER_TABLE_SIZE: the ceiling for the peer's size updates.
    private int _maxDynamicTableSize;

    // Set when we lowered the limit below the table's current maximum: the next block must
    // begin with a size update (RFC 7541 §4.2).
    private bool _sizeUpdateRequired;

    // Scratch space: a contiguous copy of a multi-segment block, and Huffman-decoded strings.
    private byte[] _blockBuffer = [];
    private byte[] _nameBuffer = [];
    private byte[] _valueBuffer = [];

    private OwnerGuard _ownerGuard;

    /// <param name="maxDynamicTableSize">Our SETTINGS_HEADER_TABLE_SIZE: the largest size update the peer may ask for.</param>
    /// <param name="maxStringLength">Longest name or value accepted (a bound against HPACK bombs; exceeding it throws).</param>
    /// <remarks>
    /// NOTE: the table starts with <paramref name="maxDynamicTableSize"/> as its maximum. RFC 7541 says
    /// it starts at the protocol's initial setting (4,096); a decoder table larger than the encoder's is
    /// harmless (the encoder never refers to the entries it evicted, and indexes count from the newest),
    /// so this only matters when the value is below 4,096: create the decoder with 4,096 and lower it
    /// with <see cref="SetMaxDynamicTableSize"/> once the peer acknowledges our SETTINGS.
    /// </remarks>
    public HpackDecoder(int maxDynamicTableSize = 4096, int maxStringLength = 64 * 1024)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(maxDynamicTableSize);
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(maxStringLength);
        _maxDynamicTableSize = maxDynamicTableSize;
        _maxStringLength = maxStringLength;
        _table = new DecoderDynamicTable(maxDynamicTableSize);
    }

    /// <summary>Current dynamic table size in octets (RFC 7541 §4.1).</summary>
    internal int DynamicTableSize => _table.Size;

    /// <summary>Current dynamic table maximum, as last set by a size update.</summary>
    internal int DynamicTableMaxSize => _table.MaxSize;

    internal int DynamicTableCount => _table.Count;

    /// <summary>Dynamic table entry by dynamic index (1 = newest), for tests.</summary>
    internal (byte[] Name, byte[] Value) GetDynamicEntry(int index)
    {
        ref readonly DecoderDynamicTable.Entry entry = ref _table[index];
        return (entry.Name.ToArray(), entry.Value.ToArray());
    }

    /// <summary>Decodes a complete header block; throws <see cref="HpackDecodingException"/> on any error.</summary>
    public void Decode(ReadOnlySequence<byte> headerBlock, IHpackHeaderHandler handler)
    {
        ArgumentNullException.ThrowIfNull(handler);
        if (headerBlock.IsSingleSegment)
        {
            Decode(headerBlock.FirstSpan, handler);
            return;
        }

        long length = headerBlock.Length;
        if (_blockBuffer.Length < length)
        {
            _blockBuffer = new byte[Math.Max(length, Math.Min((long)_blockBuffer.Length * 2, int.MaxValue))];
        }

        headerBlock.CopyTo(_blockBuffer);
        Decode(_blockBuffer.AsSpan(0, (int)length), handler);
    }

    /// <summary>Decodes a complete, contiguous header block.</summary>
    public void Decode(ReadOnlySpan<byte> block, IHpackHeaderHandler handler)
    {
        ArgumentNullException.ThrowIfNull(handler);
        _ownerGuard.Enter(nameof(HpackDecoder));
        try
        {
            DecodeCore(block, handler);
        }
        finally
        {
            _ownerGuard.Exit();
        }
    }

    private void DecodeCore(ReadOnlySpan<byte> block, IHpackHeaderHandler handler)
    {
        if (_sizeUpdateRequired && (block.IsEmpty || (block[0] & 0xE0) != 0x20))
        {
            // RFC 7541 §4.2: after the limit is lowered, "the encoder MUST signal the change with a
            // dynamic table size update ... at the beginning of the first header block following the change".
            throw new HpackDecodingException("Expected a dynamic table size update at the start of the header block.");
        }

        int position = 0;
        bool fieldSeen = false;
        while (position < block.Length)
        {
            byte first = block[position];
            if ((first & 0x80) != 0)
            {
                // RFC 7541 §6.1: indexed header field, 7-bit index.
                int index = IntegerCodec.Decode(block, ref position, 7);
                if (index == 0)
                {
                    // "The index value of 0 is not used. It MUST be treated as a decoding error".
                    throw new HpackDecodingException("Indexed header field with index 0.");
                }

                if (index <= StaticTable.Count)
                {
                    handler.OnHeader(StaticTable.Name(index), StaticTable.Value(index));
                }
                else
                {
                    ref readonly DecoderDynamicTable.Entry entry = ref GetDynamic(index);
                    handler.OnHeader(entry.Name, entry.Value);
                }

                fieldSeen = true;
            }
            else if ((first & 0x40) != 0)
            {
                // RFC 7541 §6.2.1: literal with incremental indexing, 6-bit name index.
                ReadOnlySpan<byte> name = ReadName(block, ref position, 6);
                ReadOnlySpan<byte> value = ReadString(block, ref position, ref _valueBuffer);
                _table.Add(name, value);

                // `name` may point into an entry this insertion evicted: still safe, because evicted
                // arrays are dropped, never reused, and the span keeps its array alive.
                handler.OnHeader(name, value);
                fieldSeen = true;
            }
            else if ((first & 0x20) != 0)
            {
                // RFC 7541 §6.3: dynamic table size update, 5-bit size.
                if (fieldSeen)
                {
                    // §4.2: "This dynamic table size update MUST occur at the beginning of the first
                    // header block following the change to the dynamic table size."
                    throw new HpackDecodingException("Dynamic table size update after a header field.");
                }

                int size = IntegerCodec.Decode(block, ref position, 5);
                if (size > _maxDynamicTableSize)
                {
                    // §6.3: "The new maximum size MUST be lower than or equal to the limit ... A value
                    // that exceeds this limit MUST be treated as a decoding error."
                    throw new HpackDecodingException($"Dynamic table size update to {size} exceeds the limit {_maxDynamicTableSize}.");
                }

                _table.SetMaxSize(size);
                _sizeUpdateRequired = false;
            }
            else
            {
                // RFC 7541 §6.2.2 (0000xxxx, without indexing) and §6.2.3 (0001xxxx, never indexed):
                // 4-bit name index; neither touches the table.
                ReadOnlySpan<byte> name = ReadName(block, ref position, 4);
                ReadOnlySpan<byte> value = ReadString(block, ref position, ref _valueBuffer);
                handler.OnHeader(name, value);
                fieldSeen = true;
            }
        }
    }

    /// <summary>Lowers the table limit we advertise (applies once the peer acknowledges our SETTINGS).</summary>
    /// <remarks>
    /// A limit below the table's current maximum obliges the peer to open its next block with a size
    /// update no larger than the new limit (RFC 7541 §4.2). A higher limit only allows larger updates.
    /// </remarks>
    public void SetMaxDynamicTableSize(int size)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(size);
        _maxDynamicTableSize = size;
        if (size < _table.MaxSize)
        {
            _sizeUpdateRequired = true;
        }
    }

    private ref readonly DecoderDynamicTable.Entry GetDynamic(int index)
    {
        int dynamicIndex = index - StaticTable.Count;
        if (dynamicIndex > _table.Count)
        {
            // RFC 7541 §2.3.3: "Indices strictly greater than the sum of the lengths of both tables
            // MUST be treated as a decoding error."
            throw new HpackDecodingException($"Header index {index} is out of range.");
        }

        return ref _table[dynamicIndex];
    }

    private ReadOnlySpan<byte> ReadName(ReadOnlySpan<byte> block, ref int position, int prefixBits)
    {
        int index = IntegerCodec.Decode(block, ref position, prefixBits);
        if (index == 0)
        {
            return ReadString(block, ref position, ref _nameBuffer);
        }

        if (index <= StaticTable.Count)
        {
            return StaticTable.Name(index);
        }

        return GetDynamic(index).Name;
    }

    /// <summary>RFC 7541 §5.2: a string literal, Huffman-coded when the H bit is set.</summary>
    private ReadOnlySpan<byte> ReadString(ReadOnlySpan<byte> block, ref int position, ref byte[] huffmanBuffer)
    {
        if (position >= block.Length)
        {
            throw new HpackDecodingException("Truncated header block: missing string literal.");
        }

        bool huffman = (block[position] & 0x80) != 0;
        int length = IntegerCodec.Decode(block, ref position, 7);
        if (length > block.Length - position)
        {
            throw new HpackDecodingException("Truncated header block: string literal runs past the end.");
        }

        ReadOnlySpan<byte> encoded = block.Slice(position, length);
        position += length;
        if (!huffman)
        {
            if (length > _maxStringLength)
            {
                throw new HpackDecodingException($"String literal of {length} octets exceeds the limit {_maxStringLength}.");
            }

            return encoded;
        }

        // The shortest code is 5 bits, so the decoded string is at most 8/5 of the encoded length;
        // the buffer never grows past the limit, and Huffman.Decode throws when the output overflows it.
        int bound = (int)Math.Min((long)length * 8 / 5, _maxStringLength);
        if (huffmanBuffer.Length < bound)
        {
            huffmanBuffer = new byte[Math.Min(Math.Max(bound, huffmanBuffer.Length * 2), _maxStringLength)];
        }

        int decoded = Huffman.Decode(encoded, huffmanBuffer);
        return huffmanBuffer.AsSpan(0, decoded);
    }
}
