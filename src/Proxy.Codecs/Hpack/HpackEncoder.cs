using System.Text;

namespace Proxy.Codecs.Hpack;

// Owned by the connection's frame-writer loop: blocks reach the wire in the order they are encoded.
public sealed partial class HpackEncoder
{
    // RFC 9113 §6.5.2: SETTINGS_HEADER_TABLE_SIZE starts at 4,096 until the peer says otherwise,
    // so the peer's decoder starts with a 4,096-octet table.
    private const int InitialPeerMaxDynamicTableSize = 4096;

    // Worst case for one literal field: representation octet + name length + value length integers.
    private const int LiteralOverhead = 3 * IntegerCodec.MaxEncodedLength;

    private readonly int _configuredMaxSize;
    private readonly bool _useHuffman;
    private readonly EncoderDynamicTable _table;

    // Size updates owed to the peer (RFC 7541 §4.2), applied and emitted at the next block start:
    // the smallest size since the last block (so the peer evicts what we evicted), then the final one.
    private bool _sizeUpdatePending;
    private int _pendingSmallestSize;
    private int _pendingFinalSize;

    private OwnerGuard _ownerGuard;

    // NOTE: the fields this encoder sent as an index lately, by name: a connection's blocks repeat their fields (a gRPC
    // call's request head, a backend's response), as the same name strings and mostly the same value strings. A field
    // found here is sent by its index again without the static lookup and the dynamic table's scan, which were most of a
    // warm block's cost (session 35: ~25 ns per field). A slot names a static index, or the id of a dynamic entry that is
    // checked to be still in the table. Sensitive fields (never indexed) never use it.
    private const int RecentSlots = 32;
    private readonly RecentField[] _recent = new RecentField[RecentSlots];

    /// <param name="maxDynamicTableSize">Table size we use; never above the peer's SETTINGS_HEADER_TABLE_SIZE.</param>
    /// <param name="useHuffman">Huffman-code a string when that is shorter than the raw octets.</param>
    public HpackEncoder(int maxDynamicTableSize = 4096, bool useHuffman = true)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(maxDynamicTableSize);
        _configuredMaxSize = maxDynamicTableSize;
        _useHuffman = useHuffman;
        _table = new EncoderDynamicTable(InitialPeerMaxDynamicTableSize);
        int effective = Math.Min(maxDynamicTableSize, InitialPeerMaxDynamicTableSize);
        if (effective != InitialPeerMaxDynamicTableSize)
        {
            // Using less than the peer's initial 4,096 must be announced in the first block.
            QueueSizeUpdate(effective);
        }
    }

    /// <summary>Current dynamic table size in octets (RFC 7541 §4.1), for tests.</summary>
    internal int DynamicTableSize => _table.Size;

    internal int DynamicTableMaxSize => _table.MaxSize;

    internal int DynamicTableCount => _table.Count;

    internal (string Name, string Value) GetDynamicEntry(int index) => _table[index];

    /// <summary>The peer changed SETTINGS_HEADER_TABLE_SIZE: the next block starts with a size update.</summary>
    /// <remarks>The table itself changes at the next <see cref="BeginHeaderBlock"/>, so calling this
    /// in the middle of a block cannot desynchronise the peer.</remarks>
    public void SetPeerMaxDynamicTableSize(int size)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(size);
        QueueSizeUpdate(Math.Min(_configuredMaxSize, size));
    }

    /// <summary>Begins a header block: emits any pending dynamic table size update (RFC 7541 §4.2).</summary>
    public void BeginHeaderBlock(IBufferWriter<byte> output)
    {
        ArgumentNullException.ThrowIfNull(output);
        if (!_sizeUpdatePending)
        {
            return;
        }

        _sizeUpdatePending = false;
        Span<byte> span = output.GetSpan(2 * IntegerCodec.MaxEncodedLength);
        int written = 0;
        int current = _table.MaxSize;
        if (_pendingSmallestSize < current)
        {
            // RFC 7541 §4.2: "the smallest maximum table size that occurs in that interval MUST be
            // signaled in a dynamic table size update".
            written += IntegerCodec.Encode(_pendingSmallestSize, 5, 0x20, span);
            _table.SetMaxSize(_pendingSmallestSize);
            current = _pendingSmallestSize;
        }

        if (_pendingFinalSize != current)
        {
            // "The final maximum size is always signaled, resulting in at most two updates."
            written += IntegerCodec.Encode(_pendingFinalSize, 5, 0x20, span[written..]);
            _table.SetMaxSize(_pendingFinalSize);
        }

        output.Advance(written);
    }

    /// <summary>
    /// Encodes one field. Names should already be lowercase (an uppercase name is lowercased, with an
    /// allocation). <paramref name="neverIndex"/> encodes as "never indexed" (RFC 7541 §6.2.3) for
    /// sensitive values such as authorization and cookies.
    /// </summary>
    /// <remarks>
    /// Characters are sent as single octets (ISO-8859-1); a character above U+00FF throws
    /// <see cref="ArgumentException"/>, since it cannot be sent as one octet.
    /// NOTE: authorization, proxy-authorization, cookie and set-cookie are always "never indexed"
    /// (RFC 7541 §7.1.3): their values are secrets an attacker could probe by guessing what
    /// compresses (CRIME-style), and intermediaries must keep that marking. The cost is resending
    /// cookies in full on every request.
    /// </remarks>
    public void EncodeHeader(IBufferWriter<byte> output, string name, string value, bool neverIndex = false)
    {
        ArgumentNullException.ThrowIfNull(output);
        ArgumentNullException.ThrowIfNull(name);
        ArgumentNullException.ThrowIfNull(value);
        _ownerGuard.Enter(nameof(HpackEncoder));
        try
        {
            EncodeHeaderCore(output, name, value, neverIndex);
        }
        finally
        {
            _ownerGuard.Exit();
        }
    }

    private void EncodeHeaderCore(IBufferWriter<byte> output, string name, string value, bool neverIndex)
    {
        int written;

        // 0. Sent as an index lately (see _recent).
        ref RecentField recent = ref _recent[RecentSlot(name)];
        if (!neverIndex && ReferenceEquals(recent.Name, name) && (ReferenceEquals(recent.Value, value) || string.Equals(recent.Value, value, StringComparison.Ordinal)))
        {
            int recentIndex = recent.Id < 0 ? (int)-recent.Id : DynamicIndexOf(recent.Id);
            if (recentIndex != 0)
            {
                written = IntegerCodec.Encode(recentIndex, 7, 0x80, output.GetSpan(IntegerCodec.MaxEncodedLength));
                output.Advance(written);
                return;
            }
        }

        // 1. A full match in the static table, then in the dynamic table: RFC 7541 §6.1 indexed field.
        // NOTE: looked up before validating the strings: every entry is lowercase ISO-8859-1 (the static table by
        // definition, dynamic entries were validated when added), so an exact match is valid as it stands and the
        // steady state (every field already indexed) skips the character checks.
        int staticIndex = StaticTable.Find(name, value, out bool staticValueMatched);
        if (staticValueMatched)
        {
            written = IntegerCodec.Encode(staticIndex, 7, 0x80, output.GetSpan(IntegerCodec.MaxEncodedLength));
            output.Advance(written);
            recent = new RecentField(name, value, -staticIndex);
            return;
        }

        // One scan of the dynamic table gives both the full match and the newest name match.
        bool sensitive = neverIndex || IsSensitive(name);
        int dynamicNameIndex = 0;
        if (!sensitive || staticIndex == 0)
        {
            int dynamicIndex = _table.Find(name, sensitive ? null : value, out dynamicNameIndex);
            if (dynamicIndex != 0)
            {
                written = IntegerCodec.Encode(StaticTable.Count + dynamicIndex, 7, 0x80, output.GetSpan(IntegerCodec.MaxEncodedLength));
                output.Advance(written);
                recent = new RecentField(name, value, _table.Inserted - dynamicIndex + 1); // a full match: never a sensitive field
                return;
            }
        }

        if (name.AsSpan().ContainsAnyExceptInRange('\0', '\u00FF') || value.AsSpan().ContainsAnyExceptInRange('\0', '\u00FF'))
        {
            throw new ArgumentException($"Header '{name}' has a character that does not fit in one octet.");
        }

        if (name.AsSpan().ContainsAnyInRange('A', 'Z'))
        {
            // RFC 9113 §8.2.1: uppercase field names make the message malformed. Callers should pass
            // lowercase names (this allocates), but a stray one must not break the connection.
            // The lookups above used the uppercase name, so start again with the lowercase one.
            EncodeHeaderCore(output, name.ToLowerInvariant(), value, neverIndex);
            return;
        }

        Span<byte> span = output.GetSpan(LiteralOverhead + name.Length + value.Length);

        // 2. The name by index when either table has it (static first: smaller, never evicted).
        int nameIndex = staticIndex;
        if (nameIndex == 0 && dynamicNameIndex != 0)
        {
            nameIndex = StaticTable.Count + dynamicNameIndex;
        }

        // 3. The representation: never indexed (§6.2.3), with incremental indexing (§6.2.1), or
        //    without indexing (§6.2.2).
        bool index = false;
        if (sensitive)
        {
            written = IntegerCodec.Encode(nameIndex, 4, 0x10, span);
        }
        else if (ShouldIndex(name, value))
        {
            written = IntegerCodec.Encode(nameIndex, 6, 0x40, span);
            index = true;
        }
        else
        {
            written = IntegerCodec.Encode(nameIndex, 4, 0x00, span);
        }

        if (nameIndex == 0)
        {
            written += WriteString(name, span[written..]);
        }

        written += WriteString(value, span[written..]);
        output.Advance(written);

        if (index)
        {
            if (_table.Add(name, value))
            {
                recent = new RecentField(name, value, _table.Inserted);
            }
        }
    }

    /// <summary>
    /// A slot of <see cref="_recent"/> for a name, from its length and three of its characters (no string hash). The
    /// factors are ones under which the fields of a gRPC call both ways, the X-Forwarded-* fields and a response's usual
    /// ones (:status, content-type, content-length, date, server) all have slots of their own.
    /// </summary>
    private static int RecentSlot(string name)
    {
        if (name.Length == 0)
        {
            return 0;
        }
        var mix = (uint)name.Length * 15 + (uint)name[^1] * 38 + (uint)name[name.Length >> 1] * 22 + name[1 % name.Length];
        return (int)((mix ^ (mix >> 4)) & (RecentSlots - 1));
    }

    /// <summary>The index (after the static table's) of the dynamic entry with this id, or 0 once it was evicted.</summary>
    private int DynamicIndexOf(long id) => _table.IndexOfId(id) is var dynamic and > 0 ? StaticTable.Count + dynamic : 0;

    /// <summary>A field sent as an index: <see cref="Id"/> is minus its static index, or its dynamic entry's id.</summary>
    private readonly record struct RecentField(string? Name, string? Value, long Id);

    private void QueueSizeUpdate(int size)
    {
        _pendingSmallestSize = _sizeUpdatePending ? Math.Min(_pendingSmallestSize, size) : size;
        _pendingFinalSize = size;
        _sizeUpdatePending = true;
    }

    private static bool IsSensitive(string name) => name switch
    {
        "authorization" or "proxy-authorization" or "cookie" or "set-cookie" => true,
        _ => false,
    };

    /// <summary>
    /// Indexing a field that will not repeat only evicts fields that would. Skip values that change
    /// on nearly every message, and fields too big to leave room for others.
    /// </summary>
    private bool ShouldIndex(string name, string value)
    {
        long entrySize = (long)name.Length + value.Length + DecoderDynamicTable.EntryOverhead;
        if (entrySize * 4 > (long)_table.MaxSize * 3)
        {
            return false;
        }

        return name switch
        {
            "content-length" or "etag" or "age" or "last-modified" or "content-range"
                or "if-modified-since" or "if-none-match" => false,
            _ => true,
        };
    }

    /// <summary>RFC 7541 §5.2 string literal; Huffman-coded only when strictly shorter.</summary>
    private int WriteString(string text, Span<byte> destination)
    {
        if (_useHuffman && text.Length > 0)
        {
            int huffmanLength = Huffman.GetEncodedLength(text);
            if (huffmanLength < text.Length)
            {
                int prefix = IntegerCodec.Encode(huffmanLength, 7, 0x80, destination);
                return prefix + Huffman.Encode(text, destination[prefix..]);
            }
        }

        int lengthPrefix = IntegerCodec.Encode(text.Length, 7, 0x00, destination);
        return lengthPrefix + Encoding.Latin1.GetBytes(text, destination[lengthPrefix..]);
    }
}
