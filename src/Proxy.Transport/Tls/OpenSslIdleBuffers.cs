using System.Net.Security;
using System.Reflection;
using System.Runtime.InteropServices;

namespace Proxy.Transport.Tls;

// Stateless after its one-time lookup (thread-safe: the lookup is idempotent).
/// <summary>
/// Asks OpenSSL to free a TLS connection's record buffers while they are empty (<c>SSL_MODE_RELEASE_BUFFERS</c>, as
/// nginx, HAProxy and Python's ssl module set it). .NET's OpenSSL shim does not set the mode, so each connection keeps a
/// read and a write buffer of about 17 KB each for its whole life, used or not: 34 KB of the about 50 KB of native
/// memory an idle TLS connection cost in <c>benchmarks/sse-memory.sh</c>, 68 MB at 2,000 connections.
/// </summary>
/// <remarks>
/// NOTE: no public API reaches the connection's <c>SSL*</c>. On .NET 10 on Linux, <see cref="SslStream"/>'s
/// <c>_securityContext</c> is a <see cref="SafeHandle"/> whose handle is that <c>SSL*</c>
/// (<c>SafeSslHandle : SafeDeleteSslContext</c>). When that shape or libssl's <c>SSL_ctrl</c> is not found (another
/// runtime, another platform), <see cref="TryApply"/> returns false and nothing changes; the TLS middleware logs that
/// once. Called after the handshake and before any application read or write, so no other thread is inside OpenSSL
/// for this connection. Freed buffers go back to the C heap; <see cref="Buffers.NativeHeapTrimmer"/> hands the
/// free pages back to the OS.
/// </remarks>
public static class OpenSslIdleBuffers
{
    private const int SslCtrlMode = 33;          // SSL_CTRL_MODE
    private const long SslModeReleaseBuffers = 0x10; // SSL_MODE_RELEASE_BUFFERS

    // long SSL_ctrl(SSL *ssl, int cmd, long larg, void *parg); long is 64-bit on Linux x64 and arm64.
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    private delegate long SslCtrl(IntPtr ssl, int cmd, long larg, IntPtr parg);

    private static readonly FieldInfo? s_securityContext = Resolve(out s_sslCtrl);
    private static readonly SslCtrl? s_sslCtrl;

    /// <summary>Whether this runtime and platform let <see cref="TryApply"/> work.</summary>
    public static bool IsSupported => s_securityContext is not null;

    /// <summary>Sets <c>SSL_MODE_RELEASE_BUFFERS</c> on an authenticated stream's connection; false when not possible.</summary>
    public static bool TryApply(SslStream stream)
    {
        if (s_securityContext?.GetValue(stream) is not SafeHandle context || context.IsInvalid || context.IsClosed)
        {
            return false;
        }
        var added = false;
        try
        {
            context.DangerousAddRef(ref added);
            var ssl = context.DangerousGetHandle();
            if (ssl == IntPtr.Zero)
            {
                return false;
            }
            var mode = s_sslCtrl!(ssl, SslCtrlMode, SslModeReleaseBuffers, IntPtr.Zero);
            return (mode & SslModeReleaseBuffers) != 0;
        }
        catch (ObjectDisposedException)
        {
            return false;
        }
        finally
        {
            if (added)
            {
                context.DangerousRelease();
            }
        }
    }

    private static FieldInfo? Resolve(out SslCtrl? sslCtrl)
    {
        sslCtrl = null;
        if (!OperatingSystem.IsLinux())
        {
            return null;
        }
        var field = typeof(SslStream).GetField("_securityContext", BindingFlags.Instance | BindingFlags.NonPublic);
        var sslHandleType = typeof(SslStream).Assembly.GetType("Microsoft.Win32.SafeHandles.SafeSslHandle");
        if (field is null || sslHandleType is null || !typeof(SafeHandle).IsAssignableFrom(field.FieldType)
            || !field.FieldType.IsAssignableFrom(sslHandleType))
        {
            return null;
        }
        // The same libssl .NET's shim loaded (dlopen returns the loaded one): 3 first, as the shim does.
        foreach (var name in new[] { "libssl.so.3", "libssl.so.1.1", "libssl.so" })
        {
            if (NativeLibrary.TryLoad(name, out var library) && NativeLibrary.TryGetExport(library, "SSL_ctrl", out var export))
            {
                sslCtrl = Marshal.GetDelegateForFunctionPointer<SslCtrl>(export);
                return field;
            }
        }
        return null;
    }
}
