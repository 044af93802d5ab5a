using System.Collections.Concurrent;
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
    private readonly ConcurrentStack<T>[] _stacks;

    public LoopStacks(int loops)
    {
        _stacks = new ConcurrentStack<T>[Math.Max(1, loops) + 1];
        for (var i = 0; i < _stacks.Length; i++)
        {
            _stacks[i] = new ConcurrentStack<T>();
        }
    }

    private int Slot(int loop) => loop < 0 ? 0 : 1 + (loop % (_stacks.Length - 1));

    public bool IsEmpty
    {
        get
        {
            foreach (var stack in _stacks)
            {
                if (!stack.IsEmpty)
                {
                    return false;
                }
            }
            return true;
        }
    }

    /// <summary>Keeps <paramref name="item"/> with the other items of epoll thread <paramref name="loop"/> (-1: none).</summary>
    public void Push(T item, int loop) => _stacks[Slot(loop)].Push(item);

    /// <summary>The most recently pushed item of epoll thread <paramref name="loop"/>, else of any other; false when none is left.</summary>
    public bool TryPop(int loop, [NotNullWhen(true)] out T? item)
    {
        var own = Slot(loop);
        if (_stacks[own].TryPop(out item))
        {
            return true;
        }
        for (var i = 0; i < _stacks.Length; i++)
        {
            if (i != own && _stacks[i].TryPop(out item))
            {
                return true;
            }
        }
        return false;
    }
}
