using System.Net.Sockets;
using System.Runtime.InteropServices;

namespace Proxy.Transport.Sockets.Epoll;

// Stateless: libc calls of the epoll engine (Linux only; callers check EpollEngine.IsSupported first).
internal static unsafe partial class EpollInterop
{
    public const int EpollCloexec = 0x80000;
    public const int CtlAdd = 1;
    public const uint EpollIn = 0x001;
    public const uint EpollOut = 0x004;
    public const uint EpollErr = 0x008;
    public const uint EpollHup = 0x010;
    public const uint EpollRdHup = 0x2000;
    public const uint EpollEt = 1u << 31;

    public const int EINTR = 4;
    public const int EAGAIN = 11;
    public const int MsgNoSignal = 0x4000;

    /// <summary>
    /// struct epoll_event is packed on x86-64 (12 bytes, data at offset 4) and naturally aligned elsewhere (16 bytes,
    /// data at offset 8).
    /// </summary>
    public static readonly int EventSize = RuntimeInformation.ProcessArchitecture == Architecture.X64 ? 12 : 16;
    public static readonly int EventDataOffset = RuntimeInformation.ProcessArchitecture == Architecture.X64 ? 4 : 8;

    [StructLayout(LayoutKind.Sequential)]
    public struct IoVec
    {
        public byte* Base;
        public nuint Length;
    }

    [StructLayout(LayoutKind.Sequential)]
    public struct MsgHdr
    {
        public void* Name;
        public uint NameLength;
        public IoVec* Iov;
        public nuint IovLength;
        public void* Control;
        public nuint ControlLength;
        public int Flags;
    }

    [LibraryImport("libc", EntryPoint = "epoll_create1", SetLastError = true)]
    public static partial int EpollCreate1(int flags);

    [LibraryImport("libc", EntryPoint = "epoll_ctl", SetLastError = true)]
    public static partial int EpollCtl(int epfd, int op, SafeSocketHandle fd, byte* ev);

    [LibraryImport("libc", EntryPoint = "epoll_wait", SetLastError = true)]
    public static partial int EpollWait(int epfd, byte* events, int maxEvents, int timeout);

    [LibraryImport("libc", EntryPoint = "recv", SetLastError = true)]
    public static partial nint Recv(SafeSocketHandle fd, byte* buffer, nuint length, int flags);

    [LibraryImport("libc", EntryPoint = "send", SetLastError = true)]
    public static partial nint Send(SafeSocketHandle fd, byte* buffer, nuint length, int flags);

    [LibraryImport("libc", EntryPoint = "sendmsg", SetLastError = true)]
    public static partial nint SendMsg(SafeSocketHandle fd, MsgHdr* message, int flags);

    /// <summary>The SocketError .NET reports for a Linux errno of a socket call (the ones a connection meets).</summary>
    public static SocketError ToSocketError(int errno) => errno switch
    {
        104 => SocketError.ConnectionReset,      // ECONNRESET
        32 => SocketError.Shutdown,              // EPIPE
        103 => SocketError.ConnectionAborted,    // ECONNABORTED
        107 => SocketError.NotConnected,         // ENOTCONN
        110 => SocketError.TimedOut,             // ETIMEDOUT
        111 => SocketError.ConnectionRefused,    // ECONNREFUSED
        113 => SocketError.HostUnreachable,      // EHOSTUNREACH
        101 => SocketError.NetworkUnreachable,   // ENETUNREACH
        9 => SocketError.OperationAborted,       // EBADF
        _ => SocketError.SocketError,
    };
}
