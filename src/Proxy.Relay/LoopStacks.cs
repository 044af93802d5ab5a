using System.Diagnostics.CodeAnalysis;
using Proxy.Transport.Sockets;

namespace Proxy.Relay;

// Thread-safe: any thread pushes and pops.
/// <summary>
/// Idle items (a destination's HTTP/1.1 connections) kept per epoll thread: <see cref="TryPop"/> hands out one of the
/// asking thread's own first (the caller passes <see cref="EventLoop.CurrentIndex"/>), then any other. A request served on one epoll
/// thread then reads its backend's answer on that thread too, instead of waking the other one and sharing the front
/// connection's state between two cores.
/// </summary>
internal sealed class LoopStacks<T> where T : class
{
    // Slot 0: items of no epoll thread (the runtime's engine); slot 1 + (loop % n): the items of epoll thread `loop`.
    // NOTE: an array under a lock per slot rather than ConcurrentStack: its node per Push was 54 bytes of every forwarded
    // HTTP/1.1 request (the connection goes back on each release). A slot's lock is its own thread's in the common case.
    private readonly Slot[] _slots;

    public LoopStacks(int loops)
    {
        _slots = new Slot[Math.Max(1, loops) + 1];
        for (var i = 0; i < _slots.Length; i++)
        {
            _slots[i] = new Slot();
        }
    }

    private int SlotOf(int loop) => loop < 0 ? 0 : 1 + (loop % (_slots.Length - 1));

    public bool IsEmpty
    {
        get
        {
            foreach (var slot in _slots)
            {
                if (slot.Count > 0)
                {
                    return false;
                }
            }
            return true;
        }
    }

    /// <summary>Keeps <paramref name="item"/> with the other items of epoll thread <paramref name="loop"/> (-1: none).</summary>
    public void Push(T item, int loop) => _slots[SlotOf(loop)].Push(item);

    /// <summary>The most recently pushed item of epoll thread <paramref name="loop"/>, else of any other; false when none is left.</summary>
    public bool TryPop(int loop, [NotNullWhen(true)] out T? item)
    {
        var own = SlotOf(loop);
        if (_slots[own].TryPop(out item))
        {
            return true;
        }
        for (var i = 0; i < _slots.Length; i++)
        {
            if (i != own && _slots[i].TryPop(out item))
            {
                return true;
            }
        }
        return false;
    }

    // Thread-safe: every member but Count takes the lock; Count is a glance (a stale zero only sends a pop elsewhere).
    private sealed class Slot
    {
        private readonly Lock _lock = new();
        private T[] _items = new T[4];
        private int _count;

        public int Count => Volatile.Read(ref _count);

        public void Push(T item)
        {
            lock (_lock)
            {
                if (_count == _items.Length)
                {
                    Array.Resize(ref _items, _items.Length * 2);
                }
                _items[_count] = item;
                Volatile.Write(ref _count, _count + 1);
            }
        }

        public bool TryPop([NotNullWhen(true)] out T? item)
        {
            if (Volatile.Read(ref _count) == 0)
            {
                item = null;
                return false;
            }
            lock (_lock)
            {
                if (_count == 0)
                {
                    item = null;
                    return false;
                }
                var top = _count - 1;
                item = _items[top];
                _items[top] = null!;
                Volatile.Write(ref _count, top);
                return true;
            }
        }
    }
}
