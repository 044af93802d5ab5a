namespace Proxy.Protocols.Http2;

/// <summary>
/// Finished streams a connection keeps for its next ones: the one returned last is reused first, and one that waited
/// longer than the expiry is dropped, so a connection that once ran many streams at once does not hold them for good.
/// A fixed-size ring: push and pop at the top, expiry from the bottom (the longest waiting), no allocation after construction.
/// </summary>
// Owned by one connection's read loop: not thread-safe.
internal sealed class IdleStreamPool<T> where T : class
{
    private readonly T?[] _items;
    private readonly TimeSpan[] _returnedAt;
    private int _bottom;
    private int _count;

    public IdleStreamPool(int capacity)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(capacity);
        _items = new T?[capacity];
        _returnedAt = new TimeSpan[capacity];
    }

    public int Count => _count;

    public int Capacity => _items.Length;

    /// <summary>When the longest-waiting item was returned; null when empty.</summary>
    public TimeSpan? OldestReturnedAt => _count == 0 ? null : _returnedAt[_bottom];

    /// <summary>Keeps <paramref name="item"/>, returned at <paramref name="now"/>; false (not kept) when full.</summary>
    public bool TryPush(T item, TimeSpan now)
    {
        if (_count == _items.Length)
        {
            return false;
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

    public void Clear()
    {
        Array.Clear(_items);
        _bottom = 0;
        _count = 0;
    }
}
