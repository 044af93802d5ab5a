using System.Diagnostics;

namespace Proxy.Codecs.Hpack;

// Owned by the HPACK codec instance that embeds it.

/// <summary>
/// DEBUG-only check that a codec is used by one owner at a time. Loops hop threads across awaits, so
/// this catches overlapping calls (two loops sharing a codec) rather than checking a thread id.
/// </summary>
internal struct OwnerGuard
{
    private int _busy;

    [Conditional("DEBUG")]
    public void Enter(string owner)
    {
        Debug.Assert(Interlocked.Exchange(ref _busy, 1) == 0, $"{owner} used concurrently: it has a single owner.");
    }

    [Conditional("DEBUG")]
    public void Exit() => Volatile.Write(ref _busy, 0);
}
