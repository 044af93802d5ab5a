using System.Diagnostics;

namespace Proxy.Protocols.Http2;

/// <summary>
/// DEBUG-only check that loop-owned code runs on its loop. Each loop marks its async flow (an AsyncLocal
/// flows across awaits, while handlers are queued without the execution context and so never carry a mark).
/// </summary>
// Stateless (the mark lives in each loop's execution context).
internal static class LoopOwner
{
    private static readonly AsyncLocal<object?> Current = new();

    /// <summary>Marks the calling async flow (the read loop or the frame-writer loop) as <paramref name="owner"/>.</summary>
    [Conditional("DEBUG")]
    public static void Enter(object owner) => Current.Value = owner;

    [Conditional("DEBUG")]
    public static void Assert(object owner, string what)
        => Debug.Assert(ReferenceEquals(Current.Value, owner), what + " must run on its owning loop.");
}
