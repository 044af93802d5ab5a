namespace Proxy.Codecs.Hpack;

// Owned by the HpackEncoder that created it (the connection's frame-writer loop).

/// <summary>
/// The encoder's mirror of the peer decoder's dynamic table (RFC 7541 §2.3.2, §4), with lookups by
/// field and by name. Entries carry an insertion id; the dynamic index of id is newestId - id + 1.
/// </summary>
internal sealed class EncoderDynamicTable
{
    private Entry[] _entries = new Entry[16];
    private int _oldest;
    private int _count;
    private long _nextId;

    // The newest entry id for each field and for each name (an older duplicate is shadowed).
    private readonly Dictionary<(string Name, string Value), long> _idByField = new();
    private readonly Dictionary<string, long> _idByName = new(StringComparer.Ordinal);

    public EncoderDynamicTable(int maxSize) => MaxSize = maxSize;

    public int Size { get; private set; }

    public int MaxSize { get; private set; }

    public int Count => _count;

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
    public int FindField(string name, string value) =>
        _idByField.TryGetValue((name, value), out long id) ? IndexOf(id) : 0;

    /// <summary>Dynamic index (1 = newest) of an entry with this name, or 0.</summary>
    public int FindName(string name) =>
        _idByName.TryGetValue(name, out long id) ? IndexOf(id) : 0;

    public void SetMaxSize(int maxSize)
    {
        MaxSize = maxSize;
        EvictUntilFits(0);
    }

    /// <summary>Adds a field the caller has just sent with incremental indexing (RFC 7541 §4.4).</summary>
    public void Add(string name, string value)
    {
        int entrySize = name.Length + value.Length + DecoderDynamicTable.EntryOverhead;
        if (entrySize > MaxSize)
        {
            // The decoder empties its table in this case; mirror it.
            EvictUntilFits(int.MaxValue / 2);
            return;
        }

        EvictUntilFits(entrySize);
        if (_count == _entries.Length)
        {
            Grow();
        }

        long id = _nextId++;
        _entries[(_oldest + _count) % _entries.Length] = new Entry(name, value, id);
        _count++;
        Size += entrySize;
        _idByField[(name, value)] = id;
        _idByName[name] = id;
    }

    private int IndexOf(long id) => (int)(_nextId - id);

    private void EvictUntilFits(int incoming)
    {
        while (_count > 0 && (long)Size + incoming > MaxSize)
        {
            ref Entry oldest = ref _entries[_oldest];
            Size -= oldest.Name.Length + oldest.Value.Length + DecoderDynamicTable.EntryOverhead;

            // Drop the lookups only if they point at this entry (a newer duplicate may shadow it).
            if (_idByField.TryGetValue((oldest.Name, oldest.Value), out long fieldId) && fieldId == oldest.Id)
            {
                _idByField.Remove((oldest.Name, oldest.Value));
            }

            if (_idByName.TryGetValue(oldest.Name, out long nameId) && nameId == oldest.Id)
            {
                _idByName.Remove(oldest.Name);
            }

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

    private struct Entry(string name, string value, long id)
    {
        public string Name = name;
        public string Value = value;
        public long Id = id;
    }
}
