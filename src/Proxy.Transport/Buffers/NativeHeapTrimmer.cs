using System.Runtime.InteropServices;

namespace Proxy.Transport.Buffers;

// Process-wide: one timer however many servers acquire it; Acquire and the returned lease's Dispose are thread-safe.
/// <summary>
/// Gives the C heap's free pages back to the operating system every period (glibc's <c>malloc_trim(0)</c>), while at
/// least one server holds a lease.
/// </summary>
/// <remarks>
/// NOTE: why. OpenSSL allocates from the C heap: thousands of TLS handshakes at once grow glibc's arenas, and buffers
/// freed afterwards (<see cref="Tls.OpenSslIdleBuffers"/>) leave free pages inside them that glibc keeps resident; it
/// only returns the top of an arena by itself. In <c>benchmarks/sse-memory.sh</c> (2,000 TLS connections) the arenas
/// held 128 MB free next to 37 MB in use, all of it in RSS; one trim took 2-3 ms. Other C libraries (musl) have no
/// <c>malloc_trim</c>: then nothing runs.
/// </remarks>
public static class NativeHeapTrimmer
{
    private static readonly Lock s_lock = new();
    private static readonly MallocTrim? s_trim = Resolve();
    private static Timer? s_timer;
    private static int s_leases;

    /// <summary>Whether the C library has <c>malloc_trim</c> (glibc).</summary>
    public static bool IsSupported => s_trim is not null;

    /// <summary>Trims now; returns whether the C library released memory (false when not supported).</summary>
    public static bool TrimNow() => s_trim?.Invoke(0) == 1;

    /// <summary>
    /// Starts trimming every <paramref name="period"/> (the first lease's period) until every lease is disposed. A zero
    /// or negative period, or a C library without <c>malloc_trim</c>, gives a lease that does nothing.
    /// </summary>
    public static IDisposable Acquire(TimeSpan period)
    {
        if (s_trim is null || period <= TimeSpan.Zero)
        {
            return NoLease.Instance;
        }
        lock (s_lock)
        {
            if (s_leases++ == 0)
            {
                s_timer = new Timer(static _ => TrimNow(), null, period, period);
            }
        }
        return new Lease();
    }

    private static void Release()
    {
        lock (s_lock)
        {
            if (--s_leases == 0)
            {
                s_timer?.Dispose();
                s_timer = null;
            }
        }
    }

    private static MallocTrim? Resolve()
    {
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        foreach (var name in new[] { "libc.so.6", "libc" })
        {
            if (NativeLibrary.TryLoad(name, out var libc) && NativeLibrary.TryGetExport(libc, "malloc_trim", out var export))
            {
                return Marshal.GetDelegateForFunctionPointer<MallocTrim>(export);
            }
        }
        return null;
    }

    // int malloc_trim(size_t pad);
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    private delegate int MallocTrim(nuint pad);

    private sealed class Lease : IDisposable
    {
        private int _disposed;

        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) == 0)
            {
                Release();
            }
        }
    }

    private sealed class NoLease : IDisposable
    {
        public static readonly NoLease Instance = new();

        public void Dispose()
        {
        }
    }
}
