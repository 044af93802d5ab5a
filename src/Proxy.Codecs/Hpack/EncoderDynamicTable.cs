namespace Proxy.Codecs.Hpack;

// Owned by the HpackEncoder that created it (the connection's frame-writer loop).

/// <summary>
/// The encoder's mirror of the peer decoder's dynamic table (RFC 7541 §2.3.2, §4), with lookups by
/// field and by name. Entries live in a ring buffer, newest last; dynamic index 1 is the newest.
/// </summary>
/// <remarks>
/// NOTE: lookups are a linear scan, newest first, not a hash map. The table holds at most
/// MaxSize / 32 entries (128 at the usual 4,096 octets, typically 10-30 in practice), and a scan that
/// compares lengths before characters (and references before both: apps pass the same literal strings
/// on every response) beats hashing the full name and value with the randomized string hash, which
/// made warm encoding 10-15x slower than decoding. It also allocates nothing but the entry array.
/// </remarks>
internal sealed class EncoderDynamicTable
{
    private Entry[] _entries = new Entry[16];
    private int _oldest;
    private int _count;

    public EncoderDynamicTable(int maxSize) => MaxSize = maxSize;

    public int Size { get; private set; }

    public int MaxSize { get; private set; }

    public int Count => _count;

    /// <summary>
    /// How many entries were ever added: the newest entry's id (ids count from 1). An entry keeps its id while it is in
    /// the table, and its dynamic index is <c>Inserted - id + 1</c> (the newest is 1).
    /// </summary>
    public long Inserted { get; private set; }

    /// <summary>The dynamic index of the entry with this id, or 0 once it was evicted.</summary>
    public int IndexOfId(long id)
    {
        var index = Inserted - id + 1;
        return index >= 1 && index <= _count ? (int)index : 0;
    }

    /// <summary>Entry by dynamic index, 1 = newest (for tests).</summary>
    public (string Name, string Value) this[int index]
    {
        get
        {
            ref Entry entry = ref _entries[(_oldest + _count - index) % _entries.Length];
            return (entry.Name, entry.Value);
        }
    }

    /// <summary>Dynamic index (1 = newest) of an entry with this name and value, or 0.</summary>
    public int FindField(string name, string value) => Find(name, value, out _);

    /// <summary>Dynamic index (1 = newest) of an entry with this name, or 0.</summary>
    public int FindName(string name)
    {
        Find(name, null, out int nameIndex);
        return nameIndex;
    }

    /// <summary>
    /// One scan, newest first: the dynamic index of an entry with this name and value (0 if none, or if
    /// <paramref name="value"/> is null), and in <paramref name="nameIndex"/> that of the newest entry
    /// with this name (0 if none). The newest match wins: an older duplicate is shadowed.
    /// </summary>
    public int Find(string name, string? value, out int nameIndex)
    {
        nameIndex = 0;
        Entry[] entries = _entries;
        int position = _oldest + _count - 1;
        if (position >= entries.Length)
        {
            position -= entries.Length;
        }

        int nameLength = name.Length;
        int valueLength = value?.Length ?? -1;
        for (int index = 1; index <= _count; index++)
        {
            ref Entry entry = ref entries[position];
            position = position == 0 ? entries.Length - 1 : position - 1;
            // NOTE: the lengths are the entry's own copies: a scan that read them from the strings loaded every entry's
            // name (cold on a busy proxy: the table was last touched a stream ago) to skip it.
            if (entry.NameLength != nameLength || !string.Equals(entry.Name, name, StringComparison.Ordinal))
            {
                continue;
            }

            if (nameIndex == 0)
            {
                nameIndex = index;
            }

            if (entry.ValueLength == valueLength && string.Equals(entry.Value, value, StringComparison.Ordinal))
            {
                return index;
            }
        }

        return 0;
    }

    public void SetMaxSize(int maxSize)
    {
        MaxSize = maxSize;
        EvictUntilFits(0);
    }

    /// <summary>
    /// Adds a field the caller has just sent with incremental indexing (RFC 7541 §4.4): true, its id is then
    /// <see cref="Inserted"/>; false when it is larger than the table, which is emptied instead.
    /// </summary>
    public bool Add(string name, string value)
    {
        int entrySize = name.Length + value.Length + DecoderDynamicTable.EntryOverhead;
        if (entrySize > MaxSize)
        {
            // The decoder empties its table in this case; mirror it.
            EvictUntilFits(int.MaxValue / 2);
            return false;
        }

        EvictUntilFits(entrySize);
        if (_count == _entries.Length)
        {
            Grow();
        }

        _entries[(_oldest + _count) % _entries.Length] = new Entry(name, value);
        _count++;
        Size += entrySize;
        Inserted++;
        return true;
    }

    private void EvictUntilFits(int incoming)
    {
        while (_count > 0 && (long)Size + incoming > MaxSize)
        {
            ref Entry oldest = ref _entries[_oldest];
            Size -= oldest.NameLength + oldest.ValueLength + DecoderDynamicTable.EntryOverhead;
            oldest = default;
            _oldest = _oldest + 1 == _entries.Length ? 0 : _oldest + 1;
            _count--;
        }
    }

    private void Grow()
    {
        var larger = new Entry[_entries.Length * 2];
        for (int i = 0; i < _count; i++)
        {
            larger[i] = _entries[(_oldest + i) % _entries.Length];
        }

        _entries = larger;
        _oldest = 0;
    }

    private struct Entry(string name, string value)
    {
        public string Name = name;
        public string Value = value;
        public int NameLength = name.Length;
        public int ValueLength = value.Length;
    }
}
