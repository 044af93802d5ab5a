namespace Proxy.Protocols.Http2;

/// <summary>
/// Finished streams a connection keeps for its next ones: the one returned last is reused first, and one that waited
/// longer than the expiry is dropped, so a connection that once ran many streams at once does not hold them for good.
/// A ring: push and pop at the top, expiry from the bottom (the longest waiting). It grows as streams come back (an
/// HTTP/2 connection that never ran two streams at once holds a ring of four), up to the capacity.
/// </summary>
// Owned by one connection's read loop: not thread-safe.
internal sealed class IdleStreamPool<T> where T : class
{
    private T?[] _items = [];
    private TimeSpan[] _returnedAt = [];
    private int _bottom;
    private int _count;

    public IdleStreamPool(int capacity)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(capacity);
        Capacity = capacity;
    }

    public int Count => _count;

    public int Capacity { get; }

    /// <summary>When the longest-waiting item was returned; null when empty.</summary>
    public TimeSpan? OldestReturnedAt => _count == 0 ? null : _returnedAt[_bottom];

    /// <summary>Keeps <paramref name="item"/>, returned at <paramref name="now"/>; false (not kept) when full.</summary>
    public bool TryPush(T item, TimeSpan now)
    {
        if (_count == _items.Length)
        {
            if (_count == Capacity)
            {
                return false;
            }

            Grow();
        }

        var top = (_bottom + _count) % _items.Length;
        _items[top] = item;
        _returnedAt[top] = now;
        _count++;
        return true;
    }

    /// <summary>Takes the item returned last.</summary>
    public bool TryPop(out T item)
    {
        if (_count == 0)
        {
            item = null!;
            return false;
        }

        _count--;
        var top = (_bottom + _count) % _items.Length;
        item = _items[top]!;
        _items[top] = null;
        return true;
    }

    /// <summary>Drops every item returned at or before <paramref name="cutoff"/>; returns how many.</summary>
    public int RemoveReturnedBefore(TimeSpan cutoff)
    {
        var removed = 0;
        while (_count > 0 && _returnedAt[_bottom] <= cutoff)
        {
            _items[_bottom] = null;
            _bottom = (_bottom + 1) % _items.Length;
            _count--;
            removed++;
        }

        return removed;
    }

    private void Grow()
    {
        var size = Math.Min(Capacity, Math.Max(4, _items.Length * 2));
        var items = new T?[size];
        var returnedAt = new TimeSpan[size];
        for (var i = 0; i < _count; i++)
        {
            var from = (_bottom + i) % _items.Length;
            items[i] = _items[from];
            returnedAt[i] = _returnedAt[from];
        }

        _items = items;
        _returnedAt = returnedAt;
        _bottom = 0;
    }

    public void Clear()
    {
        Array.Clear(_items);
        _bottom = 0;
        _count = 0;
    }
}
