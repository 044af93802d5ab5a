namespace Proxy.Codecs.Hpack;

// Owned by the HpackDecoder that created it (the connection's read loop).

/// <summary>
/// The decoder's dynamic table (RFC 7541 §2.3.2, §4): a ring of entries, newest first for indexing.
/// Each entry keeps its name and value in one array, the only allocation per inserted field.
/// </summary>
internal sealed class DecoderDynamicTable
{
    /// <summary>RFC 7541 §4.1: an entry's size is its name and value lengths plus 32.</summary>
    public const int EntryOverhead = 32;

    private Entry[] _entries;
    private int _oldest; // slot of the oldest entry
    private int _count;

    public DecoderDynamicTable(int maxSize)
    {
        MaxSize = maxSize;
        _entries = new Entry[Math.Max(4, Math.Min(maxSize / EntryOverhead, 64))];
    }

    /// <summary>Current size in octets (RFC 7541 §4.1).</summary>
    public int Size { get; private set; }

    public int MaxSize { get; private set; }

    public int Count => _count;

    /// <summary>Entry by dynamic index: 1 is the newest (RFC 7541 §2.3.3, index minus 61).</summary>
    public ref readonly Entry this[int index]
    {
        get
        {
            int slot = _oldest + _count - index;
            if (slot >= _entries.Length)
            {
                slot -= _entries.Length;
            }

            return ref _entries[slot];
        }
    }

    /// <summary>RFC 7541 §4.3: a new maximum evicts from the oldest end until the size fits.</summary>
    public void SetMaxSize(int maxSize)
    {
        MaxSize = maxSize;
        EvictUntilFits(0);
    }

    /// <summary>
    /// Adds a field (RFC 7541 §4.4). The name and value are copied before evicting, so they may point
    /// into an entry that the insertion evicts.
    /// </summary>
    public void Add(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        int entrySize = name.Length + value.Length + EntryOverhead;
        if (entrySize > MaxSize)
        {
            // "an attempt to add an entry larger than the maximum size causes the table to be
            // emptied of all existing entries and results in an empty table."
            Clear();
            return;
        }

        byte[] data = new byte[name.Length + value.Length];
        name.CopyTo(data);
        value.CopyTo(data.AsSpan(name.Length));

        EvictUntilFits(entrySize);
        if (_count == _entries.Length)
        {
            Grow();
        }

        int slot = _oldest + _count;
        if (slot >= _entries.Length)
        {
            slot -= _entries.Length;
        }

        _entries[slot] = new Entry(data, name.Length);
        _count++;
        Size += entrySize;
    }

    private void EvictUntilFits(int incoming)
    {
        while (_count > 0 && Size + incoming > MaxSize)
        {
            ref Entry oldest = ref _entries[_oldest];
            Size -= oldest.Data.Length + EntryOverhead;
            oldest = default;
            _oldest = _oldest + 1 == _entries.Length ? 0 : _oldest + 1;
            _count--;
        }
    }

    private void Clear()
    {
        Array.Clear(_entries);
        _oldest = 0;
        _count = 0;
        Size = 0;
    }

    private void Grow()
    {
        var larger = new Entry[_entries.Length * 2];
        for (int i = 0; i < _count; i++)
        {
            int slot = _oldest + i;
            larger[i] = _entries[slot >= _entries.Length ? slot - _entries.Length : slot];
        }

        _entries = larger;
        _oldest = 0;
    }

    public readonly struct Entry(byte[] data, int nameLength)
    {
        public readonly byte[] Data = data;
        public readonly int NameLength = nameLength;

        public ReadOnlySpan<byte> Name => Data.AsSpan(0, NameLength);

        public ReadOnlySpan<byte> Value => Data.AsSpan(NameLength);
    }
}
